#!/usr/bin/env python3
"""gen_unicode_tables.py — generate src/text/unicode_tables.c from the Unicode
Character Database shipped by Debian's `unicode-data` package.

    python3 tools/gen_unicode_tables.py [--ucd /usr/share/unicode] [--out src/text/unicode_tables.c]

Not run by the build or CI: the generated file is committed. Re-run it only
to move to another Unicode version.

What the tables hold (see src/text/unicode.h for how they are used):

  * the regex class of every code point, as the Qwen2 pre-tokenizer regex sees
    it through the Oniguruma engine of Hugging Face `tokenizers`:
      LETTER  General_Category L*  (\\p{L})
      NUMBER  General_Category N*  (\\p{N})
      SPACE   White_Space property (\\s: U+0009-000D, 0020, 0085, 00A0, 1680,
              2000-200A, 2028, 2029, 202F, 205F, 3000)
      OTHER   everything else (unassigned, marks, punctuation, symbols, ...)
    taken from this UCD version as is.

  * canonical normalisation data for NFC: canonical combining class, full
    canonical decompositions, primary composites and the NFC quick-check
    value — restricted to code points assigned in Unicode <= --nfc-age
    (default 9.0). Hugging Face `tokenizers` normalises with the
    unicode-normalization-alignments crate whose data is Unicode 9.0: a mark
    added later (e.g. U+1DFA, Unicode 10) has combining class 0 there and is
    never reordered, and newer precomposed letters never decompose. Filtering
    by DerivedAge reproduces that data exactly, because the normalisation
    properties of an assigned character never change (Unicode stability
    policy) and composition exclusions only ever list new characters.

Layout: a two-level lookup. stage1[cp >> 8] gives a block number, and
stage2[block * 256 + (cp & 255)] an index into `fx_uc_props`, a short list of
distinct property records {class, ccc, flags}. Identical 256-entry blocks are
shared, so the whole code space fits in a few tens of kilobytes.
"""
import argparse
import os
import sys

MAX_CP = 0x110000

CLS_OTHER, CLS_LETTER, CLS_NUMBER, CLS_SPACE = 0, 1, 2, 3
QC_YES, QC_MAYBE, QC_NO = 0, 1, 2
FLAG_DECOMP = 4  # has a canonical decomposition (Hangul syllables excluded)

SBASE, LBASE, VBASE, TBASE = 0xAC00, 0x1100, 0x1161, 0x11A7
LCOUNT, VCOUNT, TCOUNT = 19, 21, 28
SCOUNT = LCOUNT * VCOUNT * TCOUNT


def parse_ranges(path, want=None):
    """Yield (lo, hi, value) from a UCD file of `range ; value # comment`."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = [x.strip() for x in line.split(";")]
            r = fields[0]
            if ".." in r:
                lo, hi = (int(x, 16) for x in r.split(".."))
            else:
                lo = hi = int(r, 16)
            value = fields[1] if len(fields) > 1 else None
            if want is None or value == want:
                yield lo, hi, value


def load_unicode_data(path):
    gc = ["Cn"] * MAX_CP
    ccc = [0] * MAX_CP
    decomp = {}
    first = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            fl = line.rstrip("\n").split(";")
            cp = int(fl[0], 16)
            name = fl[1]
            if name.endswith(", First>"):
                first = cp
                continue
            if name.endswith(", Last>"):
                for c in range(first, cp + 1):
                    gc[c] = fl[2]
                    ccc[c] = int(fl[3])
                continue
            gc[cp] = fl[2]
            ccc[cp] = int(fl[3])
            if fl[5] and not fl[5].startswith("<"):
                decomp[cp] = [int(x, 16) for x in fl[5].split()]
    return gc, ccc, decomp


def parse_version(s):
    return tuple(int(x) for x in s.split("."))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ucd", default="/usr/share/unicode")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "src", "text", "unicode_tables.c"))
    ap.add_argument("--nfc-age", default="9.0", help="newest Unicode version whose characters take part in NFC")
    args = ap.parse_args()
    ucd = args.ucd
    nfc_age = parse_version(args.nfc_age)

    with open(os.path.join(ucd, "ReadMe.txt"), encoding="utf-8") as f:
        version = next((ln.split("Version")[1].split()[0] for ln in f if "Version" in ln and "of the Unicode" in ln), "?")

    gc, ccc, decomp = load_unicode_data(os.path.join(ucd, "UnicodeData.txt"))
    white = set()
    for lo, hi, _ in parse_ranges(os.path.join(ucd, "PropList.txt"), "White_Space"):
        white.update(range(lo, hi + 1))
    age = {}
    for lo, hi, v in parse_ranges(os.path.join(ucd, "DerivedAge.txt")):
        for c in range(lo, hi + 1):
            age[c] = parse_version(v)
    exclusions = set()
    for lo, hi, _ in parse_ranges(os.path.join(ucd, "CompositionExclusions.txt")):
        exclusions.update(range(lo, hi + 1))

    # Cross-check our derivation of Full_Composition_Exclusion against the
    # file that ships it (with all characters, before the age filter).
    fce_file = set()
    for lo, hi, _ in parse_ranges(os.path.join(ucd, "DerivedNormalizationProps.txt"), "Full_Composition_Exclusion"):
        fce_file.update(range(lo, hi + 1))

    def full_exclusion(cp, ccc_of):
        d = decomp[cp]
        return cp in exclusions or len(d) == 1 or ccc_of[cp] != 0 or ccc_of[d[0]] != 0

    fce_all = {cp for cp in decomp if full_exclusion(cp, ccc)}
    if fce_all != fce_file:
        sys.exit("gen_unicode_tables: derived Full_Composition_Exclusion differs from DerivedNormalizationProps.txt")

    # ---- the NFC view: only characters assigned in Unicode <= nfc_age
    def in_nfc(cp):
        return age.get(cp, (99, 0)) <= nfc_age

    nccc = [ccc[c] if in_nfc(c) else 0 for c in range(MAX_CP)]
    ndecomp = {cp: d for cp, d in decomp.items() if in_nfc(cp)}
    for cp, d in ndecomp.items():
        for x in d:
            if not in_nfc(x):
                sys.exit("gen_unicode_tables: U+%04X decomposes to a newer character U+%04X" % (cp, x))

    def full_decomp(cp):
        if cp not in ndecomp:
            return [cp]
        out = []
        for x in ndecomp[cp]:
            out.extend(full_decomp(x))
        return out

    compositions = {}
    for cp, d in ndecomp.items():
        if len(d) == 2 and not (cp in exclusions or nccc[cp] != 0 or nccc[d[0]] != 0):
            compositions[(d[0], d[1])] = cp
    nfc_no = {cp for cp in ndecomp if cp in exclusions or len(ndecomp[cp]) == 1 or nccc[cp] != 0 or nccc[ndecomp[cp][0]] != 0}
    nfc_maybe = {second for (_, second) in compositions}
    nfc_maybe.update(range(VBASE, VBASE + VCOUNT))
    nfc_maybe.update(range(TBASE + 1, TBASE + TCOUNT))

    # Sanity: U+1DFA (Unicode 10.0, ccc 218) must drop out of a 9.0 view.
    if nfc_age < (10, 0) and (ccc[0x1DFA] != 218 or nccc[0x1DFA] != 0):
        sys.exit("gen_unicode_tables: age filter failed")

    # ---- per code point records
    def cls_of(cp):
        if cp in white:
            return CLS_SPACE
        g = gc[cp]
        if g[0] == "L":
            return CLS_LETTER
        if g[0] == "N":
            return CLS_NUMBER
        return CLS_OTHER

    records = {}
    rec_list = []
    per_cp = bytearray(MAX_CP)
    for cp in range(MAX_CP):
        qc = QC_NO if cp in nfc_no else QC_MAYBE if cp in nfc_maybe else QC_YES
        flags = qc | (FLAG_DECOMP if cp in ndecomp else 0)
        rec = (cls_of(cp), nccc[cp], flags)
        idx = records.get(rec)
        if idx is None:
            idx = len(rec_list)
            records[rec] = idx
            rec_list.append(rec)
        per_cp[cp] = idx
    if len(rec_list) > 256:
        sys.exit("gen_unicode_tables: %d property records do not fit in a byte" % len(rec_list))

    blocks = {}
    block_list = []
    stage1 = []
    for hi in range(MAX_CP >> 8):
        blk = bytes(per_cp[hi << 8:(hi + 1) << 8])
        b = blocks.get(blk)
        if b is None:
            b = len(block_list)
            blocks[blk] = b
            block_list.append(blk)
        stage1.append(b)

    decomp_cps = sorted(ndecomp)
    pool = []
    offsets = []
    for cp in decomp_cps:
        offsets.append(len(pool))
        pool.extend(full_decomp(cp))
    offsets.append(len(pool))
    max_decomp = max(offsets[i + 1] - offsets[i] for i in range(len(decomp_cps)))
    comp_keys = sorted(compositions)

    # ---- emit C
    def rows(values, fmt, per_line):
        out = []
        for i in range(0, len(values), per_line):
            out.append("    " + ", ".join(fmt % v for v in values[i:i + per_line]) + ",")
        return "\n".join(out)

    lines = []
    w = lines.append
    w("/*")
    w(" * unicode_tables.c — GENERATED by tools/gen_unicode_tables.py from the Unicode")
    w(" * Character Database %s (Debian unicode-data). Do not edit; re-run the tool." % version)
    w(" *")
    w(" * Regex classes: Unicode %s. NFC data: characters assigned in Unicode <= %s" % (version, args.nfc_age))
    w(" * (the normalisation data of Hugging Face tokenizers); see unicode.h.")
    w(" *")
    w(" * %d property records, %d distinct 256-entry blocks, %d canonical" % (len(rec_list), len(block_list), len(decomp_cps)))
    w(" * decompositions (longest %d), %d primary composites." % (max_decomp, len(comp_keys)))
    w(" */")
    w('#include "unicode.h"')
    w("")
    w("const char fx_uc_tables_version[] = \"%s\";" % version)
    w("const char fx_uc_tables_nfc_version[] = \"%s\";" % args.nfc_age)
    w("")
    w("/* {class, canonical combining class, flags (bits 0-1 NFC_QC, bit 2 decomposes)} */")
    w("const fx_uc_prop fx_uc_props[%d] = {" % len(rec_list))
    w(rows(rec_list, "{%d, %d, %d}", 6))
    w("};")
    w("")
    w("const uint16_t fx_uc_stage1[%d] = {" % len(stage1))
    w(rows(stage1, "%d", 16))
    w("};")
    w("")
    w("const uint8_t fx_uc_stage2[%d] = {" % (len(block_list) * 256))
    flat = []
    for blk in block_list:
        flat.extend(blk)
    w(rows(flat, "%d", 24))
    w("};")
    w("")
    w("const int fx_uc_decomp_count = %d;" % len(decomp_cps))
    w("const uint32_t fx_uc_decomp_cp[%d] = {" % len(decomp_cps))
    w(rows(decomp_cps, "0x%04X", 10))
    w("};")
    w("const uint16_t fx_uc_decomp_off[%d] = {" % len(offsets))
    w(rows(offsets, "%d", 14))
    w("};")
    w("const uint32_t fx_uc_decomp_pool[%d] = {" % len(pool))
    w(rows(pool, "0x%04X", 10))
    w("};")
    w("")
    w("const int fx_uc_comp_count = %d;" % len(comp_keys))
    w("/* (first << 21 | second), sorted, and the composite of each pair */")
    w("const uint64_t fx_uc_comp_key[%d] = {" % len(comp_keys))
    w(rows([(a << 21) | b for a, b in comp_keys], "0x%XULL", 6))
    w("};")
    w("const uint32_t fx_uc_comp_val[%d] = {" % len(comp_keys))
    w(rows([compositions[k] for k in comp_keys], "0x%04X", 10))
    w("};")
    text = "\n".join(lines) + "\n"
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    print("wrote %s: %d records, %d blocks (%d bytes of stage2), %d decompositions, %d composites"
          % (args.out, len(rec_list), len(block_list), len(block_list) * 256, len(decomp_cps), len(comp_keys)))


if __name__ == "__main__":
    main()
