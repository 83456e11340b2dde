#!/bin/sh
# Rebuild itb_demo.elf (needs binutils for sparc64-linux-gnu; CI uses the committed ELF).
set -e
cd "$(dirname "$0")"
sparc64-linux-gnu-as -32 -Av8 -o itb_demo.o itb_demo.S
sparc64-linux-gnu-ld -m elf32_sparc -Ttext=0x40000000 -Tdata=0x40010000 --build-id=none -N -o itb_demo.elf itb_demo.o
rm itb_demo.o
