! SPARC V8 program with traps and delayed control-transfer (DCTI) couples, whose run under
! QEMU's leon3_generic machine (record_qemu.py) is the ground truth of filtered LEON ITBs.
! It traps into handlers that return with the two standard couples, `jmp %l1; rett %l2`
! (run the trapped instruction again) and `jmp %l2; rett %l2 + 4` (skip it), and runs the
! couples of the SPARC V8 manual's table (a transfer in the delay slot of another), plus
! annulled delay slots. No loads or stores, so the run is all in the registers QEMU logs.
! It ends, as itb_demo does, with `ta 0` (traps disabled: QEMU stops there). Build: ./build.sh
        .section .text
        .global _start
_start:
        wr      %g0, 0, %wim            ! no invalid window: rett never underflows
        set     traps, %g1
        wr      %g1, 0, %tbr
        rd      %psr, %g1
        or      %g1, 0xf20, %g1         ! PIL 15 (interrupts masked), ET: traps on
        wr      %g1, 0, %psr
        nop
        nop
        nop
        mov     2, %o0                  ! loop count
        clr     %o1                     ! a tally every path adds to
loop:
        ! ba; ba: the first target runs one instruction, then the second target
        ba      c1
         ba     c2
c0:     add     %o1, 100, %o1           ! never runs
c1:     add     %o1, 1, %o1             ! runs as the second ba's delay slot
        add     %o1, 100, %o1           ! never runs
c2:     add     %o1, 2, %o1
        ! bne,a taken (o0 != 0) with ba in the delay slot
        cmp     %o0, 0
        bne,a   c4
         ba     c5
c3:     add     %o1, 100, %o1           ! never runs
c4:     add     %o1, 4, %o1             ! the ba's delay slot
c5:     add     %o1, 8, %o1
        ! be not taken, not annulling: the ba runs, then its own delay slot, then its target
        be      c7
         ba     c8
c6:     add     %o1, 16, %o1            ! the ba's delay slot
c7:     add     %o1, 100, %o1           ! never runs
c8:     add     %o1, 32, %o1
        ! be,a not taken: the ba in its delay slot is annulled (not run, not traced)
        be,a    c10
         ba     c10
c9:     add     %o1, 64, %o1
c10:    add     %o1, 128, %o1
        ! ba; call: the ba's target is the call's delay slot, then the callee
        ba      c11
         call   leaf
        add     %o1, 100, %o1           ! never runs
c11:    add     %o1, 256, %o1           ! the call's delay slot, and where leaf returns
        add     %o1, 512, %o1
        ! jmp; ba: an indirect transfer first (%g3 = c13)
        set     c13, %g3
        jmp     %g3
         ba     c14
c12:    add     %o1, 100, %o1           ! never runs
c13:    add     %o1, 1024, %o1          ! the ba's delay slot
        add     %o1, 100, %o1           ! never runs
c14:    cmp     %g0, %g0                ! Z set
        ! ba with an untaken conditional branch in its delay slot
        ba      c16
         bne    c15
        add     %o1, 100, %o1           ! never runs
c15:    add     %o1, 100, %o1           ! never runs
c16:    add     %o1, 2048, %o1
        add     %o1, 1, %o1
        ! ba,a: its delay slot (a transfer) is annulled
        ba,a    c17
         ba     c15
c17:    add     %o1, 3, %o1
        ! ba with an annulling bne in its delay slot, not taken (Z set): the ba's target is annulled
        cmp     %g0, %g0
        ba      c20
         bne,a  c19
c19:    add     %o1, 100, %o1           ! never runs
c20:    add     %o1, 100, %o1           ! annulled
        add     %o1, 9, %o1
        ! the same, taken (Z clear): the ba's target runs as the bne's delay slot, then the bne's
        cmp     %o0, 0
        ba      c21
         bne,a  c22
        add     %o1, 100, %o1           ! never runs
c21:    add     %o1, 10, %o1
        add     %o1, 100, %o1           ! never runs
c22:    add     %o1, 11, %o1
        ! a trap skipped on return (jmp %l2; rett %l2 + 4)
        ta      1
        add     %o1, 5, %o1
        ! a conditional trap run again on return (jmp %l1; rett %l2): the handler sets Z
        cmp     %o0, 0
        tne     2
        add     %o1, 6, %o1
        ! a trap in a delay slot: its handler returns to the branch target (%l2)
        ba      c18
         ta     3
        add     %o1, 100, %o1           ! never runs
c18:    add     %o1, 7, %o1
        subcc   %o0, 1, %o0
        bne     loop
         nop
        ! traps off, then ta 0: QEMU's LEON3 stops there
        rd      %psr, %g1
        andn    %g1, 0x20, %g1
        wr      %g1, 0, %psr
        nop
        nop
        nop
        ta      0
        nop

leaf:
        retl
         add    %o1, 4, %o1

skip_handler:                           ! ta 1: return past the trap, through a call
        call    leaf
         nop
        jmp     %l2
         rett   %l2 + 4

retry_handler:                          ! tne 2: set Z, so the trap does not trap again
        cmp     %g0, %g0
        jmp     %l1
         rett   %l2

slot_handler:                           ! ta 3 in a delay slot: %l2 is the branch target
        jmp     %l2
         rett   %l2 + 4

        .align  4096
traps:                                  ! trap table: 256 entries of 16 bytes
        .skip   0x81 * 16
        ba      skip_handler            ! 0x81: ta 1
         nop
        nop
        nop
        ba      retry_handler           ! 0x82: tne 2
         nop
        nop
        nop
        mov     %psr, %l0               ! 0x83: ta 3
        ba      slot_handler
         nop
        nop
        .skip   (256 - 0x84) * 16
