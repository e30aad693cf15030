// The dispatch targets (specdec/cpu.h): ordered, so that a CPU supports every target below its
// best one (the tests and SPECDEC_ISA rely on it); Avx2Vnni runs the AVX2 code but for its
// quantized products, in the encoding this CPU has.
#include <gtest/gtest.h>

#include <string>

#include "specdec/cpu.h"
#include "specdec/error.h"

namespace specdec {
namespace {

TEST(CpuTargets, EveryTargetBelowTheBestIsSupportedAndTheRestAreRefused) {
  const std::vector<Isa> isas = supported_isas();
  ASSERT_FALSE(isas.empty());
  for (size_t i = 0; i < isas.size(); ++i) EXPECT_EQ(static_cast<int>(isas[i]), static_cast<int>(i));
  EXPECT_EQ(isas.back(), detected_isa());
  const Isa saved = active_isa();
  for (int i = static_cast<int>(detected_isa()) + 1; i <= static_cast<int>(Isa::Avx512); ++i)
    EXPECT_THROW(set_active_isa(static_cast<Isa>(i)), Error) << isa_name(static_cast<Isa>(i));
  EXPECT_EQ(active_isa(), saved);
  // The EVEX build of the vpdpbusd products needs exactly what the AVX-512 target needs.
  if (detected_isa() == Isa::Avx512) {
    EXPECT_GE(isas.size(), 3u);
  }
  if (detected_isa() < Isa::Avx2Vnni) {
    EXPECT_FALSE(avx_vnni_detected());
  }
}

TEST(CpuTargets, Avx2VnniRunsTheAvx2KernelsButForItsProducts) {
  EXPECT_EQ(vector_isa(Isa::Avx2Vnni), Isa::Avx2);
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) EXPECT_EQ(vector_isa(isa), isa);
  EXPECT_EQ(std::string(isa_name(Isa::Avx2Vnni)), "avx2vnni");
  if (detected_isa() < Isa::Avx2Vnni) GTEST_SKIP() << "this CPU has neither AVX-VNNI nor AVX-512 VNNI";
  const Isa saved = set_active_isa(Isa::Avx2Vnni);
  EXPECT_EQ(active_isa_label(), avx_vnni_detected() ? "avx2vnni" : "avx2vnni(evex)");
  set_active_isa(saved);
}

}  // namespace
}  // namespace specdec
