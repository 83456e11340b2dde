#!/bin/sh
# Rebuild the coverage fixtures: two ELFs with DWARF line tables from cov.c, and their
# execution traces recorded with QEMU user mode and written as Tarmac.
# Needs aarch64-linux-gnu-gcc, arm-none-eabi-gcc, qemu-user and cputrace installed.
set -e
cd "$(dirname "$0")"
FLAGS="-O1 -g -nostdlib -static -ffreestanding -fdebug-prefix-map=$PWD=."
aarch64-linux-gnu-gcc $FLAGS -fno-pie -no-pie -Wl,-z,max-page-size=4096 -Wl,--build-id=none \
    -o cov-a64.elf cov.c
arm-none-eabi-gcc $FLAGS -mthumb -mcpu=cortex-a7 -o cov-t32.elf cov.c
for v in a64 t32; do
    qemu=qemu-aarch64; [ $v = t32 ] && qemu=qemu-arm
    $qemu -singlestep -d exec,nochain -D cov-$v.log ./cov-$v.elf || true  # exits with the score
    python qemu_to_tarmac.py cov-$v.elf cov-$v.log > cov-$v.tarmac
    rm cov-$v.log
done
