#!/usr/bin/env python3
"""Writes a llama2.c tokenizer.bin from a sentencepiece .model file.

llama.cpp's llama2.c converter (llama-convert-llama2c-to-ggml) takes its
vocabulary either from a GGUF file or from a llama2.c `tokenizer.bin`; the
repository keeps stories260K's tokenizer only as the sentencepiece model
`tok512.model`. This script does what llama2.c's `tokenizer.py export` does
(piece text with U+2581 turned into a space, BOS/EOS written as "\\n<s>\\n" and
"\\n</s>\\n", the piece's score), without the sentencepiece package: it decodes
the ModelProto's `pieces` (field 1: piece = 1, score = 2, type = 3) itself.
The output is a pure function of the input, byte for byte.

Usage: spm_to_llama2c_vocab.py tok512.model tok512.bin
"""
import struct
import sys


def varint(buf, pos):
    shift = 0
    value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def fields(buf):
    """Yields (field number, wire type, value) of one protobuf message."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, pos = varint(buf, pos)
        elif wire == 1:
            val, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = varint(buf, pos)
            val, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            val, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield num, wire, val


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model = open(sys.argv[1], "rb").read()
    pieces = []
    bos_id, eos_id = 1, 2  # sentencepiece defaults; llama2.c's run.c assumes them
    for num, wire, val in fields(model):
        if num == 1 and wire == 2:
            piece, score, ptype = "", 0.0, 1
            for n, w, v in fields(val):
                if n == 1:
                    piece = v.decode("utf-8")
                elif n == 2:
                    score = struct.unpack("<f", v)[0]
                elif n == 3:
                    ptype = v
            pieces.append((piece, score, ptype))
        elif num == 2 and wire == 2:  # TrainerSpec: bos_id = 41, eos_id = 42
            for n, w, v in fields(val):
                if n == 41 and w == 0:
                    bos_id = v
                elif n == 42 and w == 0:
                    eos_id = v
    tokens = []
    for i, (piece, score, _) in enumerate(pieces):
        if i == bos_id:
            piece = "\n<s>\n"
        elif i == eos_id:
            piece = "\n</s>\n"
        tokens.append((piece.replace("\u2581", " ").encode("utf-8"), score))
    with open(sys.argv[2], "wb") as f:
        f.write(struct.pack("<I", max(len(b) for b, _ in tokens)))
        for b, score in tokens:
            f.write(struct.pack("<fI", score, len(b)))
            f.write(b)
    print(f"{sys.argv[2]}: {len(tokens)} pieces (bos {bos_id}, eos {eos_id})", file=sys.stderr)


if __name__ == "__main__":
    main()
