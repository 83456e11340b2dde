#!/bin/sh
# Rebuild the corpus ELFs from src/ with Debian's cross compilers:
#   apt-get install gcc-arm-none-eabi gcc-aarch64-linux-gnu
# Output is deterministic for a given compiler version (the committed files were built with
# arm-none-eabi-gcc 12.2.1 and aarch64-linux-gnu-gcc 12.2.0).
set -eu
cd "$(dirname "$0")"

COMMON="-O2 -g1 -Wall -Wextra -Werror -ffreestanding -nostdlib -nostartfiles -static
        -fno-tree-loop-distribute-patterns -fno-asynchronous-unwind-tables
        --param=case-values-threshold=4
        -ffile-prefix-map=$PWD=. -Wa,--debug-prefix-map,$PWD=.
        -Wl,-T,src/link.ld -Wl,--build-id=none -Wl,-n -Wl,--no-warn-rwx-segments"
# -fno-tree-loop-distribute-patterns: memset/memcpy are written here; GCC must not make them
#   call themselves. case-values-threshold=4: AArch64 GCC builds a jump table for the switch.
# -n: no page alignment of the segment, so the files stay small.
ARM="arm-none-eabi-gcc $COMMON -mfloat-abi=soft -Wl,--defsym=LOAD_ADDRESS=0x8000"
A64="aarch64-linux-gnu-gcc $COMMON -mgeneral-regs-only -mstrict-align -fno-pic -no-pie
     -Wl,--defsym=LOAD_ADDRESS=0x80000"
C_ARM="src/crt0_arm.S src/calls.c src/semihost.c -lgcc"

# shellcheck disable=SC2086  # the flag lists are meant to split
$ARM -march=armv7-a -marm -o calls-a32.elf $C_ARM
$ARM -march=armv7-a -mthumb -o calls-t32.elf $C_ARM
$A64 -o calls-a64.elf src/crt0_a64.S src/calls.c src/semihost.c
$ARM -march=armv5te -marm -Wl,--defsym=LOAD_ADDRESS=0 -o calls-armv5te.elf $C_ARM
$ARM -march=armv5te -mthumb -Wl,--defsym=LOAD_ADDRESS=0 -o calls-armv5te-thumb.elf $C_ARM
$ARM -march=armv7-a -o exceptions-a32.elf src/exceptions_a32.S
$A64 -o exceptions-a64.elf src/exceptions_a64.S
