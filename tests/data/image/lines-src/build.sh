#!/bin/sh
# Rebuilds the DWARF line-table fixtures (any host gcc; the line tables are what matter).
set -e
cd "$(dirname "$0")"
for version in 4 5; do
    gcc -gdwarf-$version -O0 -nostdlib -static -fno-pie -no-pie -fno-asynchronous-unwind-tables \
        -Wl,--build-id=none -fdebug-prefix-map="$PWD"=. \
        -o ../lines-dwarf$version.elf lines.c util/helper.c
done
