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

// AMX (Intel Sapphire Rapids and later: eight tile registers and int8 tile products). True when
// the CPU has AMX-TILE and AMX-INT8, the AVX-512 target is supported, and the kernel granted
// this process the tile state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once on the first call).
bool amx_detected();
// Whether the AVX-512 target runs the Q8_0 / Q4_K / Q5_K / Q6_K products of calls with many
// activation rows (prefill) on AMX tiles. They give the same bits as the VNNI tiles
// (docs/DESIGN.md), so this only changes speed. Default off (measured no faster, BENCHMARKS
// section 20); SPECDEC_AMX=1 turns it on where amx_detected().
bool amx_active();
// Turns AMX on or off (on requires amx_detected()); returns the previous setting. For tests and
// benchmarks.
bool set_amx_active(bool on);
// "avx512+amx" when the AVX-512 target is active with AMX, else isa_name(active_isa()).
std::string active_isa_label();

}  // namespace specdec
