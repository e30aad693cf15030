#include "specdec/cpu.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>

#include "specdec/error.h"

namespace specdec {

namespace {

bool os_saves_zmm() {
  unsigned eax, edx;
  __asm__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (eax & 0xE6) == 0xE6;  // XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM
}
bool os_saves_ymm() {
  unsigned eax, edx;
  __asm__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (eax & 0x6) == 0x6;
}

// AVX-VNNI: cpuid leaf 7 sub-leaf 1, eax bit 4 (the VEX form of vpdpbusd on 128/256-bit vectors).
bool probe_avx_vnni() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < 1) return false;  // a: the highest sub-leaf
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  return a & (1u << 4);
}

Isa probe() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::Scalar;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29);
  if (!osxsave || !os_saves_ymm()) return Isa::Scalar;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return Isa::Scalar;
  const bool avx2 = b & (1u << 5);
  const bool avx512f = b & (1u << 16), avx512dq = b & (1u << 17), avx512bw = b & (1u << 30),
             avx512vl = b & (1u << 31), vnni = c & (1u << 11);
  // The AVX-512 files are compiled for exactly these (CMakeLists.txt SPECDEC_AVX512_FLAGS):
  // F, DQ, BW, VL and VNNI, as on Ice Lake / Cascade Lake and later Xeons and on Zen 4.
  if (avx2 && fma && f16c && avx512f && avx512dq && avx512bw && avx512vl && vnni && os_saves_zmm())
    return Isa::Avx512;
  if (avx2 && fma && f16c) return probe_avx_vnni() ? Isa::Avx2Vnni : Isa::Avx2;
  return Isa::Scalar;
}

Isa initial_isa() {
  Isa best = detected_isa();
  if (const char* env = std::getenv("SPECDEC_ISA"); env && *env) {
    std::string s(env);
    Isa want = s == "scalar" ? Isa::Scalar : s == "avx2" ? Isa::Avx2 : s == "avx2vnni" ? Isa::Avx2Vnni
             : s == "avx512" ? Isa::Avx512 : best;
    if (static_cast<int>(want) <= static_cast<int>(best)) return want;
  }
  return best;
}

bool probe_amx() {
  unsigned a, b, c, d;
  if (probe() != Isa::Avx512 || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = d & (1u << 24), int8 = d & (1u << 25);
  if (!tile || !int8) return false;
  // Linux enables the 8 KiB tile data state per process on request (since 5.16).
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtileData = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
}

// Default KQuants where detected (cpu.h: the measurements behind it); SPECDEC_AMX=0 / 1.
AmxUse initial_amx() {
  const char* env = std::getenv("SPECDEC_AMX");
  const std::string setting = env ? env : "";
  if (setting == "0" || !amx_detected()) return AmxUse::Off;
  return setting == "1" ? AmxUse::All : AmxUse::KQuants;
}

std::atomic<int>& amx_setting() {
  static std::atomic<int> use{static_cast<int>(initial_amx())};
  return use;
}

// cpuid leaf 0's vendor string ("GenuineIntel", "AuthenticAMD", ...); empty without cpuid.
std::string cpu_vendor() {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return {};
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4), std::memcpy(vendor + 4, &d, 4), std::memcpy(vendor + 8, &c, 4);
  return vendor;
}

bool genuine_intel() { return cpu_vendor() == "GenuineIntel"; }

// An AMD CPU of family 26 (Zen 5) or later: cpuid leaf 1's base family plus, where that is
// 15, its extended family.
bool amd_family_26_or_later() {
  unsigned a, b, c, d;
  if (cpu_vendor() != "AuthenticAMD" || !__get_cpuid(1, &a, &b, &c, &d)) return false;
  const unsigned base = (a >> 8) & 0xF, family = base == 0xF ? base + ((a >> 20) & 0xFF) : base;
  return family >= 26;
}

// A named setting: environment variable `var` naming one of `values`, else `fallback`.
template <typename E>
E setting_from_env(const char* var, std::initializer_list<std::pair<const char*, E>> values, E fallback) {
  if (const char* env = std::getenv(var); env && *env) {
    for (const auto& [name, value] : values)
      if (std::string(env) == name) return value;
  }
  return fallback;
}

DecodePrefetch initial_decode_prefetch() {
  const DecodePrefetch fallback = genuine_intel()            ? DecodePrefetch::Deep
                                  : amd_family_26_or_later() ? DecodePrefetch::Burst
                                                             : DecodePrefetch::Light;
  return setting_from_env<DecodePrefetch>(
      "SPECDEC_DECODE_PREFETCH",
      {{"light", DecodePrefetch::Light}, {"deep", DecodePrefetch::Deep}, {"burst", DecodePrefetch::Burst}}, fallback);
}

std::atomic<int>& decode_prefetch_setting() {
  static std::atomic<int> p{static_cast<int>(initial_decode_prefetch())};
  return p;
}

VerifyPrefetch initial_verify_prefetch() {
  return setting_from_env<VerifyPrefetch>("SPECDEC_VERIFY_PREFETCH",
                                          {{"far", VerifyPrefetch::Far}, {"near", VerifyPrefetch::Near}},
                                          genuine_intel() ? VerifyPrefetch::Near : VerifyPrefetch::Far);
}

std::atomic<int>& verify_prefetch_setting() {
  static std::atomic<int> p{static_cast<int>(initial_verify_prefetch())};
  return p;
}

std::atomic<int>& active() {
  static std::atomic<int> isa{static_cast<int>(initial_isa())};
  return isa;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx2Vnni: return "avx2vnni";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

Isa detected_isa() {
  static const Isa isa = probe();
  return isa;
}

bool avx_vnni_detected() {
  static const bool vex = detected_isa() >= Isa::Avx2Vnni && probe_avx_vnni();
  return vex;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (int i = 0; i <= static_cast<int>(detected_isa()); ++i) out.push_back(static_cast<Isa>(i));
  return out;
}

Isa active_isa() { return static_cast<Isa>(active().load(std::memory_order_relaxed)); }

Isa set_active_isa(Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(detected_isa()))
    throw Error(std::string("ISA ") + isa_name(isa) + " is not supported by this CPU");
  return static_cast<Isa>(active().exchange(static_cast<int>(isa)));
}

bool amx_detected() {
  static const bool amx = probe_amx();
  return amx;
}

AmxUse amx_use() { return static_cast<AmxUse>(amx_setting().load(std::memory_order_relaxed)); }

bool amx_active() { return amx_use() != AmxUse::Off; }

AmxUse set_amx_use(AmxUse use) {
  if (use != AmxUse::Off && !amx_detected()) throw Error("AMX is not supported by this CPU (or the kernel refused the tile state)");
  return static_cast<AmxUse>(amx_setting().exchange(static_cast<int>(use)));
}

const char* decode_prefetch_name(DecodePrefetch p) {
  return p == DecodePrefetch::Deep ? "deep" : p == DecodePrefetch::Burst ? "burst" : "light";
}

DecodePrefetch decode_prefetch() {
  return static_cast<DecodePrefetch>(decode_prefetch_setting().load(std::memory_order_relaxed));
}

DecodePrefetch set_decode_prefetch(DecodePrefetch p) {
  return static_cast<DecodePrefetch>(decode_prefetch_setting().exchange(static_cast<int>(p)));
}

const char* verify_prefetch_name(VerifyPrefetch p) { return p == VerifyPrefetch::Near ? "near" : "far"; }

VerifyPrefetch verify_prefetch() {
  return static_cast<VerifyPrefetch>(verify_prefetch_setting().load(std::memory_order_relaxed));
}

VerifyPrefetch set_verify_prefetch(VerifyPrefetch p) {
  return static_cast<VerifyPrefetch>(verify_prefetch_setting().exchange(static_cast<int>(p)));
}

std::string active_isa_label() {
  const Isa isa = active_isa();
  if (isa == Isa::Avx2Vnni && !avx_vnni_detected()) return "avx2vnni(evex)";
  return std::string(isa_name(isa)) + (isa == Isa::Avx512 && amx_active() ? "+amx" : "");
}

}  // namespace specdec
