#!/usr/bin/env python3
"""Checks a headless-browser screenshot of report.html: a PNG of the window's
size that is not blank and shows the charts' bar colours.

Usage: check_screenshot.py SHOT.png WIDTH HEIGHT
Standard library only: the PNG is decoded here (8-bit RGB/RGBA, no interlace).
"""
import struct
import sys
import zlib

# Fill colours report_html.cc gives the first bars (kPalette): the mode chart draws them.
BAR_COLOURS = [(0x4E, 0x79, 0xA7), (0xF2, 0x8E, 0x2B), (0x59, 0xA1, 0x4F)]


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        sys.exit(f"{path}: unexpected PNG format depth={depth} colour={colour} interlace={interlace}")
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev, at = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[at], bytearray(raw[at + 1:at + 1 + stride])
        at += 1 + stride
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def main():
    path, want_w, want_h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    width, height, bpp, rows = decode(path)
    if (width, height) != (want_w, want_h):
        sys.exit(f"{path}: {width}x{height}, expected {want_w}x{want_h}")
    colours = {}
    for row in rows:
        for x in range(0, len(row), bpp):
            px = tuple(row[x:x + 3])
            colours[px] = colours.get(px, 0) + 1
    if len(colours) < 16:
        sys.exit(f"{path}: {len(colours)} distinct colours: the page rendered blank")
    missing = [c for c in BAR_COLOURS if colours.get(c, 0) < 200]
    if missing:
        sys.exit(f"{path}: the chart bars' colours {missing} are missing: the SVG charts did not render")
    print(f"{path}: {width}x{height}, {len(colours)} colours, chart bars present")


if __name__ == "__main__":
    main()
