#pragma once
// Which trainer this is. The definitions are written at every build by
// cmake/build_id.cmake (into the build folder).

namespace trainer {

/// The version and the source this binary was built from, e.g. "0.1.0 (git
/// 1a2b3c4d5e6f; sources 9f8e7d6c5b4a)": the git commit (", modified" after
/// it when tracked files differed from it; no commit outside a git checkout)
/// and a hash of the source files compiled in, which differs wherever the
/// sources do. Printed by --version, stored in checkpoints (root attribute
/// trainer_version) and ONNX files (producer_version).
const char* build_id();

/// The version and the sources hash alone, e.g. "0.1.0 (sources
/// 9f8e7d6c5b4a)": the same for builds of the same sources, from a git
/// checkout or not. The processes of a run compare it.
const char* build_sources();

}  // namespace trainer
