#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Embeds a text file as a NUL-terminated C string: embed.py INPUT OUTPUT SYMBOL.
A .json file is checked to be valid JSON first, so a broken document fails the build;
any file must be UTF-8 without NUL bytes, which would cut the string short."""
import json
import sys

src, dst, symbol = sys.argv[1:4]
text = open(src, encoding="utf-8").read()
if src.endswith(".json"):
    json.loads(text)
if "\0" in text:
    sys.exit("%s holds a NUL byte" % src)
body = ",".join(str(b) for b in text.encode("utf-8") + b"\0")
with open(dst, "w", encoding="utf-8") as f:
    f.write("/* Generated from %s by api/embed.py. */\n" % src.split("/")[-1])
    f.write("const char %s[] = {%s};\n" % (symbol, body))
