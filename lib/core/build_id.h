#pragma once
// Which trainer this is. The definition is written at every build by
// cmake/build_id.cmake (into the build folder).

namespace trainer {

/// The version and the source this binary was built from, e.g. "0.1.0 (git
/// 1a2b3c4d5e6f; sources 9f8e7d6c5b4a)": the git commit (", modified" after
/// it when tracked files differed from it; no commit outside a git checkout:
/// "0.1.0 (sources 9f8e7d6c5b4a)") and a hash of the source files the build
/// reads, the same for the same sources, from a git checkout or not. Printed
/// by --version, stored in checkpoints (root attribute trainer_version) and
/// ONNX files (producer_version); the processes of a run compare its version
/// and sources hash.
const char* build_id();

}  // namespace trainer
