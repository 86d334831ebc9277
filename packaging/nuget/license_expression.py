#!/usr/bin/env python3
"""Writes <license type="expression">EXPR</license> into the nuspec of a
packed .nupkg, before its <licenseUrl>, as `dotnet pack` does for
PackageLicenseExpression. Debian's nuget (2.8) refuses that element in the
nuspec it packs but installs packages that carry it.

Usage: license_expression.py PACKAGE.nupkg SPDX-EXPRESSION
"""
import os
import re
import sys
import tempfile
import zipfile


def main(package, expression):
    if not re.fullmatch(r"[A-Za-z0-9.+ ()-]+", expression):
        sys.exit("license_expression: not an SPDX expression: %r" % expression)
    element = '<license type="expression">%s</license>' % expression
    folder = os.path.dirname(os.path.abspath(package))
    with zipfile.ZipFile(package) as zin:
        members = zin.infolist()
        nuspecs = [m for m in members if "/" not in m.filename and m.filename.endswith(".nuspec")]
        if len(nuspecs) != 1:
            sys.exit("license_expression: %s holds %d nuspec files, not 1" % (package, len(nuspecs)))
        fd, scratch = tempfile.mkstemp(suffix=".nupkg", dir=folder)
        os.close(fd)
        try:
            with zipfile.ZipFile(scratch, "w", zipfile.ZIP_DEFLATED) as zout:
                for member in members:
                    data = zin.read(member.filename)
                    if member is nuspecs[0]:
                        data = add_license(data.decode("utf-8"), element).encode("utf-8")
                    zout.writestr(member, data)
            os.replace(scratch, package)
        except BaseException:
            os.unlink(scratch)
            raise


def add_license(nuspec, element):
    if "<license " in nuspec or "<license>" in nuspec:
        sys.exit("license_expression: the nuspec already names a licence")
    anchor = re.search(r"^([ \t]*)<licenseUrl>", nuspec, re.MULTILINE)
    if anchor is None:
        sys.exit("license_expression: the nuspec has no <licenseUrl> to place it before")
    return nuspec[: anchor.start()] + anchor.group(1) + element + "\n" + nuspec[anchor.start():]


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip())
    main(sys.argv[1], sys.argv[2])
