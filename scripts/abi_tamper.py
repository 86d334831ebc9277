#!/usr/bin/env python3
"""Edits a libabigail ABI dump the way a change of pvllm.h would change it,
for scripts/abi_check.sh --self-test. Usage: abi_tamper.py EDIT IN OUT with
EDIT one of
  remove-function:NAME          the function and its ELF symbol are gone
  append-member:STRUCT          a 64-bit field after the last one (size grows)
  prepend-member:STRUCT         a 64-bit field first, the others move back
  remove-member:STRUCT:FIELD    the field is gone (size unchanged)
  append-enumerator:ENUM        a value after the largest one
  remove-enumerator:ENUM        the largest value is gone
"""
import sys
import xml.etree.ElementTree as ET


def struct(root, name):
    for c in root.iter("class-decl"):
        if c.get("name") == name and c.get("size-in-bits"):
            return c
    sys.exit(f"abi_tamper: no struct {name}")


def enum(root, name):
    for e in root.iter("enum-decl"):
        if e.get("name") == name:
            return e
    sys.exit(f"abi_tamper: no enum {name}")


def new_member(like, offset, name):
    m = ET.Element("data-member", {"access": "public", "layout-offset-in-bits": str(offset)})
    var = like.find("var-decl")
    ET.SubElement(m, "var-decl", {"name": name, "type-id": var.get("type-id"),
                                  "visibility": "default"})
    return m


def grow(c, bits):
    c.set("size-in-bits", str(int(c.get("size-in-bits")) + bits))


def main():
    edit, src, dst = sys.argv[1:4]
    tree = ET.parse(src)
    root = tree.getroot()
    op, *args = edit.split(":")
    if op == "remove-function":
        removed = 0
        for parent in list(root.iter()):
            for child in list(parent):
                if child.tag in ("elf-symbol", "function-decl") and child.get("name") == args[0]:
                    parent.remove(child)
                    removed += 1
        if removed < 2:
            sys.exit(f"abi_tamper: no function {args[0]}")
    elif op == "append-member":
        c = struct(root, args[0])
        members = c.findall("data-member")
        c.append(new_member(members[-1], int(c.get("size-in-bits")), "appended"))
        grow(c, 64)
    elif op == "prepend-member":
        c = struct(root, args[0])
        members = c.findall("data-member")
        for m in members:
            m.set("layout-offset-in-bits", str(int(m.get("layout-offset-in-bits")) + 64))
        c.insert(list(c).index(members[0]), new_member(members[0], 0, "prepended"))
        grow(c, 64)
    elif op == "remove-member":
        c = struct(root, args[0])
        for m in c.findall("data-member"):
            if m.find("var-decl").get("name") == args[1]:
                c.remove(m)
                break
        else:
            sys.exit(f"abi_tamper: {args[0]} has no field {args[1]}")
    elif op in ("append-enumerator", "remove-enumerator"):
        e = enum(root, args[0])
        last = max(e.findall("enumerator"), key=lambda v: int(v.get("value")))
        if op == "remove-enumerator":
            e.remove(last)
        else:
            e.append(ET.Element("enumerator", {"name": args[0].upper() + "_APPENDED",
                                               "value": str(int(last.get("value")) + 1)}))
    else:
        sys.exit(f"abi_tamper: unknown edit {edit}")
    tree.write(dst)


if __name__ == "__main__":
    main()
