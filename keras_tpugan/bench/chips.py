"""The dense bf16 peak of known accelerators, from their vendors' datasheets."""

# Dense (no sparsity) bf16 peak TFLOP/s per JAX device, from the vendors'
# datasheets. A JAX device is one TPU core on v2/v3, one chip from v4 on.
# Matched against `device_kind`, longest name first.
CHIP_PEAK_TFLOPS = {
    "H200": 989.0,
    "H100 PCIe": 756.0,
    "H100": 989.0,
    "A100": 312.0,
    "L4": 121.0,
    "A10G": 70.0,
    "TPU v2": 22.5,
    "TPU v3": 61.5,
    "TPU v4": 275.0,
    "TPU v5 lite": 197.0,
    "TPU v5e": 197.0,
    "TPU v5p": 459.0,
    "TPU v5": 459.0,
    "TPU v6 lite": 918.0,
    "TPU v6e": 918.0,
}


def chip_peak_tflops(device_kind):
    """The dense bf16 peak of a known chip, or None.

    Args:
        device_kind: A JAX device's `device_kind` (e.g. `"NVIDIA H200"`,
            `"TPU v4"`).

    Returns:
        TFLOP/s per JAX device, or None for a chip not in
        `CHIP_PEAK_TFLOPS`.
    """
    for name in sorted(CHIP_PEAK_TFLOPS, key=len, reverse=True):
        if name.lower() in device_kind.lower():
            return CHIP_PEAK_TFLOPS[name]
    return None
