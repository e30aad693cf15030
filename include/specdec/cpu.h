// specdec/cpu.h — runtime CPU feature detection and kernel dispatch target.
//
// The binary is built for baseline x86-64; SIMD kernels live in per-ISA translation units
// compiled with their own -m flags and are chosen at run time by cpuid. Tests force every
// target the machine supports in turn (an AVX-512 machine also runs the AVX2 and scalar paths).
#pragma once

#include <string>
#include <vector>

namespace specdec {

// Avx2Vnni is the AVX2 target with its int8 products on 256-bit `vpdpbusd` (one instruction per
// 4 byte products and lane, where AVX2 needs vpmaddubsw + vpmaddwd + an add): the same exact
// integer sums, so the same bits as Avx2 (docs/DESIGN.md). It runs the AVX-VNNI (VEX) encoding
// on CPUs with AVX-VNNI (Intel Alder Lake and later client cores and E-core Xeons, which have no
// AVX-512; AMD Zen 5), else the EVEX encoding of AVX-512 VNNI + VL: every CPU with the Avx512
// target can run it, so the targets stay ordered (each CPU supports every target below its best).
enum class Isa { Scalar = 0, Avx2 = 1, Avx2Vnni = 2, Avx512 = 3 };

const char* isa_name(Isa isa);  // "scalar", "avx2", "avx2vnni", "avx512"
// The target whose kernels run everything but the quantized products: Avx2 for Avx2Vnni,
// else isa itself.
inline Isa vector_isa(Isa isa) { return isa == Isa::Avx2Vnni ? Isa::Avx2 : isa; }
// Best target this CPU and build support (AVX-512 needs F, BW, VL, DQ, VNNI; AVX2 needs AVX2, FMA,
// F16C; Avx2Vnni those plus AVX-VNNI, or the AVX-512 target's features).
Isa detected_isa();
// Whether Avx2Vnni runs the VEX (AVX-VNNI) encoding here; false: the EVEX one (or none).
bool avx_vnni_detected();
// Every target usable here, scalar first.
std::vector<Isa> supported_isas();
// The target kernels dispatch to now (default detected_isa(), or
// SPECDEC_ISA=scalar|avx2|avx2vnni|avx512).
Isa active_isa();
// Forces a target (must be supported); returns the previous one. For tests and benchmarks.
Isa set_active_isa(Isa isa);

// AMX (Intel Sapphire Rapids and later: eight tile registers and int8 tile products). True when
// the CPU has AMX-TILE and AMX-INT8, the AVX-512 target is supported, and the kernel granted
// this process the tile state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once on the first call).
bool amx_detected();
// Which products of calls with many activation rows (kAmxMinRows or more: prefill) the AVX-512
// target runs on AMX tiles. They give the same bits as the VNNI tiles (docs/DESIGN.md), so this
// only changes speed.
//   Off:     none.
//   KQuants: Q4_K and Q5_K matrices, the default where amx_detected(). A 1B Q4_K_M prefill of
//            64-row chunks ran 1.09-1.37x as fast so on the 2-core Emerald Rapids VM of
//            docs/BENCHMARKS.md section 36 (and 1.1-1.3x on the 16-core Sapphire Rapids of 20b).
//   All:     also Q8_0 and Q6_K read in place (SPECDEC_AMX=1; repacked Q6_K, Q6KTiles16, stays
//            on the VNNI tiles). A 1B Q8_0 prefill ran 0.68-0.97x as fast on AMX on that VM,
//            and Q6_K's tiles were slower at every M in section 20.
// SPECDEC_AMX=0 gives Off, SPECDEC_AMX=1 All (where amx_detected()); otherwise the default.
enum class AmxUse { Off = 0, KQuants = 1, All = 2 };
AmxUse amx_use();
// Sets it (anything but Off requires amx_detected(), or throws Error); returns the previous
// setting. For tests and benchmarks.
AmxUse set_amx_use(AmxUse use);
// amx_use() != AmxUse::Off.
bool amx_active();
// "avx512+amx" when the AVX-512 target is active with AMX, "avx2vnni(evex)" for Avx2Vnni in the
// EVEX encoding, else isa_name(active_isa()).
std::string active_isa_label();

// How a decode (a product of one activation row) prefetches the weights of repacked matrices.
// Prefetches are hints: only speed changes, never a bit.
//   Light: Q8_0, float and the AVX-512 K-quant tiles (Chunks16Tiles16, Q6KTiles16) none (the
//          hardware prefetchers follow one sequential stream best there; for the K-quants
//          BENCHMARKS 49d, after section 47 had them prefetch as a verify), but Q5_K, which
//          still prefetches as a verify (each super-block's lines in one burst, 8 KiB ahead
//          into L2); the other quantized types 4 KiB ahead into L1. Best on the Zen 4 VMs of
//          docs/BENCHMARKS.md sections 34-35, 47 and 49.
//   Deep:  as a verify's tiles prefetch: AVX-512 Tiles16 matrices 8 KiB ahead into L2, float
//          matrices 32 KiB; the AVX2 path's repacked Q8_0 tiles their 9 KiB ahead into L2
//          instead of L1 (its other Tiles8 tiles keep their own 1-row prefetch). Best on the
//          Emerald Rapids VM of section 36, where Light left a 1B F16 decode at 0.57-0.68 of
//          the read probe and a Q8_0 one at 0.67-0.83, and for the AVX2 Q8_0 tiles on the
//          Intel VM of section 42 (0.70-0.72 against 0.55-0.56).
//   Burst: the AVX-512 K-quant tiles (Chunks16Tiles16, Q6KTiles16) 4 KiB ahead into L1,
//          each super-block's lines in one burst at its start instead of spread over its 8
//          blocks of 32 values; the Q8_0 and float tiles (one stream each) as under Deep. On
//          the Zen 5 VM of section 43, 2-thread Q4_K and Q6_K decode products from memory took 0.80-0.92x
//          the time of Light's spread (which took 0.85x the burst's on the Zen 4 of section 31);
//          in section 44 (the same VM kind), a 1B forward's Q8_0 calls (layer_calls) ~0.96x
//          Light's with Deep's prefetch and its F16 calls ~0.93x (AVX-512; AVX2 F16 ~0.92x).
enum class DecodePrefetch { Light = 0, Deep = 1, Burst = 2 };
// Whether a decode's Q8_0 and float tiles (one sequential stream per tile) prefetch as under
// Deep: under Deep and Burst.
inline bool stream_tiles_prefetch_deep(DecodePrefetch p) { return p == DecodePrefetch::Deep || p == DecodePrefetch::Burst; }
const char* decode_prefetch_name(DecodePrefetch p);  // "light" / "deep" / "burst"
// Default Deep on Intel CPUs (cpuid vendor GenuineIntel), Burst on AMD CPUs of family 26
// (0x1A, Zen 5) and later, Light elsewhere; SPECDEC_DECODE_PREFETCH=light|deep|burst
// overrides (other values are ignored).
DecodePrefetch decode_prefetch();
// Sets it; returns the previous setting. For tests and benchmarks.
DecodePrefetch set_decode_prefetch(DecodePrefetch p);

// How a verify (a product of several activation rows on the AVX-512 VNNI tiles) prefetches the
// weights of repacked K-quant matrices (Chunks16Tiles16: Q2_K-Q5_K; Q6KTiles16). Hints only, as above.
//   Far:  8 KiB ahead into L2, as the other Tiles16 matrices. On the Zen 4 VM of
//         docs/BENCHMARKS.md section 30, prefetches 2-8 KiB ahead into L1 left a 9-row verify
//         ~1.5x as slow as into L2 (they evicted the activations); 768 bytes was not measured
//         there, so non-Intel CPUs keep this.
//   Near: 768 bytes ahead into L1, nothing into L2. On the Intel VM of section 42, 5-9 rows of
//         8192x2048 Q4_K, Q5_K and Q6_K matrices from memory took 0.82-0.88x the time of Far
//         (Far plus Near: no gain); Q8_0 and the legacy types took 1.02-1.12x, so they keep Far.
enum class VerifyPrefetch { Far = 0, Near = 1 };
const char* verify_prefetch_name(VerifyPrefetch p);  // "far" / "near"
// Default Near on Intel CPUs (cpuid vendor GenuineIntel), Far elsewhere;
// SPECDEC_VERIFY_PREFETCH=far|near overrides (other values are ignored).
VerifyPrefetch verify_prefetch();
// Sets it; returns the previous setting. For tests and benchmarks.
VerifyPrefetch set_verify_prefetch(VerifyPrefetch p);

}  // namespace specdec
