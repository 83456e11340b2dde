"""The CPU models the recorder emulates, by name, and the default for each kind of program."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from unicorn import arm64_const as a64
from unicorn import arm_const as arm

from ..errors import CputraceError


class Arch(enum.Enum):
    """The architectures the recorder runs, by ELF machine."""

    ARM = "EM_ARM"  # AArch32: A32 and T32
    AARCH64 = "EM_AARCH64"


@dataclass(frozen=True, slots=True)
class CpuModel:
    """One unicorn CPU model and the architecture facts exception entry depends on."""

    name: str
    arch: Arch
    unicorn_model: int
    vbar: bool = False  # AArch32 vectors relocatable by VBAR (the Security Extensions)
    secure: bool = False  # has the Security Extensions: modes print with `_s`, as Fast Models do


_ARMV7A = {"vbar": True, "secure": True}

CPU_MODELS: dict[str, CpuModel] = {
    model.name: model
    for model in (
        CpuModel("cortex-a7", Arch.ARM, arm.UC_CPU_ARM_CORTEX_A7, **_ARMV7A),
        CpuModel("cortex-a8", Arch.ARM, arm.UC_CPU_ARM_CORTEX_A8, **_ARMV7A),
        CpuModel("cortex-a9", Arch.ARM, arm.UC_CPU_ARM_CORTEX_A9, **_ARMV7A),
        CpuModel("cortex-a15", Arch.ARM, arm.UC_CPU_ARM_CORTEX_A15, **_ARMV7A),
        CpuModel("arm926", Arch.ARM, arm.UC_CPU_ARM_926),
        CpuModel("arm946", Arch.ARM, arm.UC_CPU_ARM_946),
        CpuModel("arm1136", Arch.ARM, arm.UC_CPU_ARM_1136),
        CpuModel("pxa250", Arch.ARM, arm.UC_CPU_ARM_PXA250),  # XScale, ARMv5TE
        CpuModel("pxa255", Arch.ARM, arm.UC_CPU_ARM_PXA255),
        CpuModel("pxa270", Arch.ARM, arm.UC_CPU_ARM_PXA270),
        CpuModel("cortex-a53", Arch.AARCH64, a64.UC_CPU_ARM64_A53, secure=True),
        CpuModel("cortex-a57", Arch.AARCH64, a64.UC_CPU_ARM64_A57, secure=True),
        CpuModel("cortex-a72", Arch.AARCH64, a64.UC_CPU_ARM64_A72, secure=True),
    )
}
"""Models by name. M-profile cores are left out: they boot from a vector table and stack
their own exception frames, which the recorder does not model."""

DEFAULT_CPUS = {Arch.ARM: "cortex-a15", Arch.AARCH64: "cortex-a72"}
"""A Cortex-A15 runs A32 and T32 with interworking and also runs ARMv4T-ARMv7 code."""


class CpuChoiceError(CputraceError):
    """The CPU model asked for does not exist or does not run the program's architecture."""


def choose_cpu(arch: Arch, name: str | None = None) -> CpuModel:
    """The model called `name` (which must run `arch`), or the default for `arch`."""
    model = CPU_MODELS.get(name or DEFAULT_CPUS[arch])
    if model is None:
        raise CpuChoiceError(f"unknown CPU model {name!r}; known: {', '.join(CPU_MODELS)}")
    if model.arch is not arch:
        raise CpuChoiceError(
            f"CPU model {model.name} runs {model.arch.value} code; the program is {arch.value}"
        )
    return model
