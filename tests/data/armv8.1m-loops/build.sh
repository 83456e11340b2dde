#!/bin/sh
# Rebuilds loops.objdump from loops.s (GNU binutils 2.40, Debian's gcc-arm-none-eabi).
set -e
cd "$(dirname "$0")"
arm-none-eabi-as -march=armv8.1-m.main+mve -mthumb loops.s -o /tmp/loops.o
arm-none-eabi-objdump -d /tmp/loops.o | sed -n '/^ *[0-9a-f]*:/p' > loops.objdump
