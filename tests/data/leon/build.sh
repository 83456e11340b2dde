#!/bin/sh
# Rebuild itb_demo.elf and itb_traps.elf, and record itb_traps under QEMU (itb_traps.qemu.txt).
# Needs binutils for sparc64-linux-gnu and qemu-system-sparc (Debian binutils-sparc64-linux-gnu,
# qemu-system-sparc 7.2); the tests use the committed files.
set -e
cd "$(dirname "$0")"
for program in itb_demo itb_traps; do
    sparc64-linux-gnu-as -32 -Av8 -o "$program.o" "$program.S"
    sparc64-linux-gnu-ld -m elf32_sparc -Ttext=0x40000000 -Tdata=0x40010000 --build-id=none -N \
        -o "$program.elf" "$program.o"
    rm "$program.o"
done
# One instruction per translation block; each block's log starts with the registers before it
# runs. The final `ta 0` (traps off) asks QEMU to stop, and it runs that `ta` again until it
# does: the log is kept up to its first run.
log=$(mktemp)
qemu-system-sparc -M leon3_generic -nographic -no-reboot -kernel itb_traps.elf \
    -singlestep -d exec,cpu,nochain -D "$log"
grep -E '^(pc:|%[goli]0-7:|psr:)' "$log" | awk '/^pc:/ { if ($0 == last) exit; last = $0 } { print }' \
    > itb_traps.qemu.txt
rm "$log"
