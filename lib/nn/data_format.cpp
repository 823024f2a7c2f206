#include "nn/data_format.h"

namespace trainer {

void read_data_format(ParamReader& p) {
  if (!p.given("data_format")) return;
  if (p.get_string("data_format", std::nullopt) != "channels_last")
    p.fail("data_format", "must be channels_last (tensors here are [N, H, W, C]; a channels_first model takes "
                          "its images as they are, with data_format removed or channels_last)");
}

}  // namespace trainer
