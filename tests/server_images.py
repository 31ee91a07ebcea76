#!/usr/bin/env python3
"""server_images.py — pixels of the PNG and PPM files flux-server's tests
compare (tests/run_server.sh), read independently of the server: PNG by
zlib and the five filters (8-bit gray/RGB/RGBA, not interlaced), binary PPM
as written by djpeg / dwebp.

  same A B        exit 0 when A and B hold the same RGB pixels
  psnr A B MIN    exit 0 when the PSNR of B against A is at least MIN dB
"""
import math, struct, sys, zlib


def png_rgb(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and interlace == 0 and ctype in (0, 2, 6), "unsupported PNG"
            ch = {0: 1, 2: 3, 6: 4}[ctype]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * ch, [], bytearray(w * ch)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b, c = prev[i], prev[i - ch] if i >= ch else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    px = bytearray()
    for line in rows:
        for x in range(w):
            p = line[x * ch : x * ch + ch]
            px += bytes(p[:3]) if ch >= 3 else bytes(p) * 3
    return w, h, bytes(px)


def ppm_rgb(data):
    fields, pos = [], 0
    while len(fields) < 4:  # P6 W H MAX, comments skipped
        while data[pos : pos + 1].isspace():
            pos += 1
        if data[pos : pos + 1] == b"#":
            pos = data.index(b"\n", pos)
            continue
        end = pos
        while not data[end : end + 1].isspace():
            end += 1
        fields.append(data[pos:end])
        pos = end
    assert fields[0] == b"P6" and fields[3] == b"255", "not an 8-bit P6 PPM"
    w, h = int(fields[1]), int(fields[2])
    return w, h, data[pos + 1 : pos + 1 + w * h * 3]


def rgb(path):
    data = open(path, "rb").read()
    return png_rgb(data) if data[:4] == b"\x89PNG" else ppm_rgb(data)


if __name__ == "__main__":
    a, b = rgb(sys.argv[2]), rgb(sys.argv[3])
    if sys.argv[1] == "same":
        print(f"same: {a[0]}x{a[1]} vs {b[0]}x{b[1]}: {'equal' if a == b else 'different'}")
        sys.exit(0 if a == b else 1)
    assert a[:2] == b[:2], f"sizes differ: {a[:2]} vs {b[:2]}"
    mse = sum((x - y) ** 2 for x, y in zip(a[2], b[2])) / len(a[2])
    psnr = 10 * math.log10(255 ** 2 / mse) if mse else float("inf")
    print(f"psnr: {psnr:.1f} dB (at least {sys.argv[4]})")
    sys.exit(0 if psnr >= float(sys.argv[4]) else 1)
