#pragma once
// Which trainer this is. The definition is written at every build by
// cmake/build_id.cmake (into the build folder).

namespace trainer {

/// The version and the source this binary was built from: "0.1.0 (git
/// 1a2b3c4d5e6f)", with ", modified" after the commit when tracked files
/// differed from it, or "0.1.0 (no git)" when built outside a git checkout.
/// Printed by --version, stored in checkpoints (root attribute
/// trainer_version) and compared between the processes of a run.
const char* build_id();

}  // namespace trainer
