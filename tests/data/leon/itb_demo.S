! Small SPARC V8 program whose instruction trace is the LEON ITB ground truth.
! Exercises loads and stores of every width, LDD/STD, LDSTUB, SWAP, CALL and JMPL (retl),
! taken and untaken annulling branches, and a final software trap. unicorn 2.1.4's SPARC
! model does not enter trap handlers or register-window traps, so the program stays in one
! window (a leaf function) and traps only at its end. Build: ./build.sh
        .section .text
        .global _start
_start:
        sethi   %hi(buf), %l0
        or      %l0, %lo(buf), %l0
        mov     %l0, %o0
        mov     6, %o1
        clr     %o2
loop:
        ld      [%o0], %o3
        add     %o2, %o3, %o2
        st      %o2, [%o0 + 4]
        ldd     [%o0 + 8], %o4
        std     %o4, [%o0 + 16]
        ldstub  [%o0 + 24], %g1
        swap    [%o0 + 28], %g2
        call    func
         mov    %o1, %g3
        andcc   %o1, 1, %g0
        be,a    skip
         sub    %o2, 1, %o2
skip:
        subcc   %o1, 1, %o1
        bne,a   loop
         add    %o2, 3, %o2
        ba,a    done
         nop
func:
        sll     %g3, 2, %g4
        stb     %g4, [%o0 + 32]
        sth     %g4, [%o0 + 34]
        ldub    [%o0 + 33], %g5
        ldsh    [%o0 + 34], %g6
        retl
         add    %g5, %g6, %o5
done:
        ta      0
        nop

        .section .data
        .align  8
buf:
        .word   5, 0, 0x11111111, 0x22222222, 0, 0, 0, 0xabcdef01, 0, 0, 0, 0
