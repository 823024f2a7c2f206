#include "world_checks.h"

#include <fstream>
#include <vector>

#include "config/shared_settings.h"
#include "core/build_id.h"
#include "core/fnv1a.h"

namespace trainer::cli {

namespace {

/// What two builds must share to run together, from a build_id: "0.1.0 sources 9f8e7d6c5b4a)" of "0.1.0 (git
/// 1a2b3c4d5e6f; sources 9f8e7d6c5b4a)" or "0.1.0 (sources 9f8e7d6c5b4a)"; the whole id when it names no
/// sources.
std::string sources_of(const std::string& id) {
  const size_t at = id.find("sources ");
  return at == std::string::npos ? id : id.substr(0, id.find(' ')) + " " + id.substr(at);
}

}  // namespace

void require_same_build(ProcessGroup& world, const std::string& command) {
  const std::string tag = "trainer ";  // a process whose text lacks it runs a trainer from before this check
  const Gathered g = gather(world, tag + build_id() + "\t" + command);
  const auto build = [&](size_t r) {
    const std::string id = g.text(r).substr(0, g.text(r).find('\t'));
    return id.rfind(tag, 0) == 0 ? id : std::string("an older trainer (one without a build id)");
  };
  for (size_t r = 1; r < g.all.size(); ++r)
    if (sources_of(build(r)) != sources_of(build(0)))
      throw_alike(&world, g.process(r) + " runs " + build(r) + ", " + g.process(0) + " " + build(0) +
                              ": every process of a run must run a build of the same sources (build the same "
                              "commit, without local changes, on every host, or share one build; 'trainer "
                              "--version' names it)");
  // Summary on one process and training on another would meet in other collectives and print one's settings
  // as the other's error.
  const auto command_of = [&](size_t r) {
    const size_t tab = g.text(r).find('\t');
    return tab == std::string::npos ? std::string() : g.text(r).substr(tab + 1);
  };
  for (size_t r = 1; r < g.all.size(); ++r)
    if (!command_of(r).empty() && !command_of(0).empty() && command_of(r) != command_of(0))
      throw_alike(&world, g.process(r) + " runs '" + command_of(r) + "', " + g.process(0) + " '" + command_of(0) +
                              "': every process of a run must run the same command");
}

void require_same_settings(ProcessGroup& world, const Config& config, bool resumes) {
  const Gathered g = gather(world, shared_settings(config, resumes));
  for (size_t r = 1; r < g.all.size(); ++r) {
    if (g.text(r) == g.text(0)) continue;  // the usual case: the same text, not parsed
    if (const auto d = settings_difference(g.text(r), g.text(0))) {
      // The comparison reads the texts, not the reader's defaults: a key left out on one side only may be one
      // written out at its default on the other.
      const bool left_out = (d->a == "not given") != (d->b == "not given") && d->key != "--resume";
      throw_alike(&world, d->key + " is " + d->a + " on " + g.process(r) + ", " + d->b + " on " + g.process(0) +
                              ": every process of a run must train with the same config and flags (" +
                              config.path + " on rank 0; only the data folders, data.loader_threads, "
                              "training.output_dir and the paths of --resume and initial_weights may differ)" +
                              (left_out ? "; a key left out differs from one given, even at its default: give "
                                          "it on every process (in the config or as a flag), or on none"
                                        : ""));
    }
  }
}

void require_same_file(ProcessGroup& world, const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  uint64_t h = fnv1a({});
  size_t size = 0;
  std::string chunk(1 << 20, '\0');
  while (in.read(chunk.data(), std::streamsize(chunk.size())) || in.gcount() > 0) {
    h = fnv1a(std::string_view(chunk.data(), size_t(in.gcount())), h);
    size += size_t(in.gcount());
  }
  const bool read = in.is_open() && !in.bad();
  const Gathered g = gather(world, (read ? std::to_string(size) + " " + std::to_string(h) : "unreadable") + "\n" + path);
  const auto digest = [&](size_t r) { return g.text(r).substr(0, g.text(r).find('\n')); };
  const auto path_of = [&](size_t r) { return g.text(r).substr(g.text(r).find('\n') + 1); };
  for (size_t r = 0; r < g.all.size(); ++r) {
    if (digest(r) == "unreadable")
      throw_alike(&world, g.process(r) + " could not read '" + path_of(r) + "' (" + what +
                              ") again after loading it: every process of a run reads it; check the file on that "
                              "host");
    if (r > 0 && digest(r) != digest(0))
      throw_alike(&world, g.process(r) + " read other contents at '" + path_of(r) + "' (" + what + ") than " +
                              g.process(0) + " at '" + path_of(0) +
                              "': every process of a run must read the same checkpoint (a shared file system, or "
                              "identical copies)");
  }
}

}  // namespace trainer::cli
