// specdec/cpu.h — runtime CPU feature detection and kernel dispatch target.
//
// The binary is built for baseline x86-64; SIMD kernels live in per-ISA translation units
// compiled with their own -m flags and are chosen at run time by cpuid. Tests force every
// target the machine supports in turn (an AVX-512 machine also runs the AVX2 and scalar paths).
#pragma once

#include <string>
#include <vector>

namespace specdec {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

const char* isa_name(Isa isa);
// Best target this CPU and build support (AVX-512 needs F, BW, VL, DQ, VNNI; AVX2 needs AVX2, FMA, F16C).
Isa detected_isa();
// Every target usable here, scalar first.
std::vector<Isa> supported_isas();
// The target kernels dispatch to now (default detected_isa(), or SPECDEC_ISA=scalar|avx2|avx512).
Isa active_isa();
// Forces a target (must be supported); returns the previous one. For tests and benchmarks.
Isa set_active_isa(Isa isa);

}  // namespace specdec
