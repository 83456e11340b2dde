@ Every Armv8.1-M low-overhead-loop instruction (WLS, DLS, WLSTP, DLSTP, LE, LETP, LCTP),
@ forward and back, with each size and a few registers; then the encodings that share
@ their first halfword with another (Rn = pc), as raw words.
.syntax unified
.thumb
.text
start:
wls lr, r2, fwd
wls lr, r12, fwd
dls lr, r3
wlstp.8 lr, r2, fwd
wlstp.16 lr, r2, fwd
wlstp.32 lr, r4, fwd
wlstp.64 lr, r11, fwd
dlstp.8 lr, r3
dlstp.16 lr, r0
dlstp.32 lr, r7
dlstp.64 lr, r14
lctp
le lr, start
le start
letp lr, start
.inst.w 0xf03fc001
.inst.w 0xf04fc001
.inst.w 0xf04fe001
.inst.w 0xf03fe001
.inst.w 0xf002c000
.inst.w 0xf01fe001
.inst.w 0xf02fe001
.inst.w 0xf00fc801
.inst.w 0xf01fc000
nop
fwd:
nop
