// validate_for_training: models that parse but cannot be trained on image/mask
// pairs are rejected before any data is read, with the place and the fix.
#include <catch2/catch.hpp>

#include "config/config.h"
#include "core/error.h"
#include "nn/model.h"
#include "train/callbacks/registry.h"
#include "train/trainer.h"

using namespace trainer;

namespace {

std::string error_of(const std::string& input, const std::string& last, const std::string& callbacks = "") {
  Config c = parse_config("model:\n  layers:\n    - {name: in, type: Input, shape: " + input +
                              "}\n    - {name: c1, type: Conv2D, filters: 2, kernel_size: 3, padding: same}\n"
                              "    - " + last + "\ndata: {images: a, masks: b, validation_split: 0.2}\n"
                              "training:\n  epochs: 1\n  metrics: [dice]\n" + callbacks,
                          "v.yaml");
  Model m(c.model, c.path);
  try {
    validate_for_training(c, m);
    check_callback_files(c);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

const std::string kOut = "{name: out, type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}";

}  // namespace

TEST_CASE("a trainable model passes and its output becomes logits", "[validate]") {
  CHECK(error_of("[8, 8, 3]", kOut).empty());
  Config c = parse_config("model:\n  layers:\n    - {type: Input, shape: [4, 4, 1]}\n    - " + kOut +
                              "\ndata: {images: a, masks: b}\ntraining: {epochs: 1}\n",
                          "v.yaml");
  Model m(c.model, c.path);
  REQUIRE_FALSE(m.output_is_logits());
  validate_for_training(c, m);
  CHECK(m.output_is_logits());
  CHECK(error_of("[8, 8, 1]", kOut,
                 "  callbacks:\n    - {type: ModelCheckpoint, filepath: 'm-{epoch:02d}-{val_dice:.3f}.h5'}\n")
            .empty());
  // learning_rate is a log name only with ReduceLROnPlateau, which logs it.
  const std::string lr_name = "    - {type: ModelCheckpoint, filepath: 'm-{learning_rate:.0e}.h5'}\n";
  CHECK_THAT(error_of("[8, 8, 1]", kOut, "  callbacks:\n" + lr_name), Catch::Contains("unknown name 'learning_rate'"));
  CHECK_THAT(error_of("[8, 8, 1]", kOut, "  callbacks:\n" + lr_name + "    - {type: ReduceLROnPlateau}\n"),
             Catch::Contains("unsupported"));
  CHECK(error_of("[8, 8, 1]", kOut,
                 "  callbacks:\n    - {type: ModelCheckpoint, filepath: 'm-{learning_rate:.6f}.h5'}\n"
                 "    - {type: ReduceLROnPlateau}\n")
            .empty());
}

TEST_CASE("a val_* placeholder without validation data is rejected before training", "[validate]") {
  const Config c = parse_config("model:\n  layers:\n    - {type: Input, shape: [4, 4, 1]}\n    - " + kOut +
                                    "\ndata: {images: a, masks: b}\ntraining:\n  callbacks:\n"
                                    "    - {type: ModelCheckpoint, filepath: 'm-{val_loss:.2f}.h5'}\n",
                                "v.yaml");
  CHECK_THROWS_WITH(check_callback_files(c), Catch::Contains("v.yaml:8:") &&
                                                 Catch::Contains("unknown name 'val_loss'") &&
                                                 Catch::Contains("known: epoch, loss") &&
                                                 Catch::Contains("(val_* values need validation data: set "
                                                                 "data.validation_split or"));
}

TEST_CASE("untrainable models are rejected with the place and the fix", "[validate]") {
  CHECK_THAT(error_of("[8, 8, 4]", kOut), Catch::Contains("v.yaml:3:7: layer 'in'") &&
                                              Catch::Contains("4 channels") && Catch::Contains("[H, W, 3]"));
  CHECK_THAT(error_of("[8, 8, 3]", "{name: out, type: Conv2D, filters: 2, kernel_size: 1, activation: sigmoid}"),
             Catch::Contains("v.yaml:5:7: layer 'out'") && Catch::Contains("outputs [8, 8, 2]") &&
                 Catch::Contains("filters: 1"));
  CHECK_THAT(error_of("[8, 8, 3]", "{name: out, type: MaxPooling2D}"), Catch::Contains("outputs [4, 4, 2]"));
  // Our binary dice over K softmax channels points to Keras 3's Dice, which takes them.
  const std::string softmax3 = "{name: out, type: Conv2D, filters: 3, kernel_size: 1, activation: softmax}";
  CHECK_THAT(error_of("[8, 8, 3]", softmax3, "  loss: dice\n"),
             Catch::Contains("use loss: sparse_categorical_crossentropy with activation: softmax; Keras 3's Dice "
                             "(loss: Dice) is over the softmax channels)"));
  CHECK_THAT(error_of("[8, 8, 3]", softmax3), Catch::Contains("activation: softmax)") && !Catch::Contains("Dice"));
  CHECK_THAT(error_of("[8, 8, 3]", "{name: out, type: Conv2D, filters: 1, kernel_size: 1}"),
             Catch::Contains("v.yaml:5:7: layer 'out'") && Catch::Contains("add activation: sigmoid"));
  CHECK_THAT(error_of("[8, 8, 3]", kOut, "  callbacks:\n    - {type: ModelCheckpoint, filepath: 'm-{val_iou}.h5'}\n"),
             Catch::Contains("v.yaml:11:") &&
                 Catch::Contains("training.callbacks[0] (ModelCheckpoint): filepath 'm-{val_iou}.h5'") &&
                 Catch::Contains("val_iou"));
}

TEST_CASE("a checkpoint filepath naming one of the run's own files is rejected", "[validate]") {
  for (const char* own : {"log.csv", "last.h5", "./final.h5", "last.h5/b.h5"}) {
    INFO(own);
    CHECK_THAT(error_of("[8, 8, 1]", kOut,
                        std::string("  callbacks:\n    - {type: ModelCheckpoint, filepath: '") + own + "'}\n"),
               Catch::Contains("v.yaml:11:") && Catch::Contains("the run's own") &&
                   Catch::Contains("choose another name"));
  }
  CHECK(error_of("[8, 8, 1]", kOut, "  callbacks:\n    - {type: ModelCheckpoint, filepath: 'ck/last.h5'}\n").empty());
}

TEST_CASE("a TensorBoard log_dir naming one of the run's files is rejected for training", "[validate][tensorboard]") {
  // Log_dir: log.csv failed after the first epoch.
  const std::string checkpoint = "    - {type: ModelCheckpoint, filepath: ck/best.h5}\n";
  for (const char* dir : {"log.csv", "./last.h5/", "final.h5/x", "ck/best.h5", "ck//best.h5/."}) {
    INFO(dir);
    CHECK_THAT(error_of("[8, 8, 1]", kOut,
                        "  callbacks:\n" + checkpoint + "    - {type: TensorBoard, log_dir: '" + dir + "'}\n"),
               Catch::Contains("v.yaml:12:") && Catch::Contains("(TensorBoard): 'log_dir' '" + std::string(dir) +
                                                                "' is (or lies in) the run's file") &&
                   Catch::Contains("choose another folder inside output_dir, e.g. 'logs'"));
  }
  for (const char* dir : {"logs", "./logs/", ".", "ck", "ck/tb", "last.h5x", "logs/log.csv"}) {
    INFO(dir);
    CHECK(error_of("[8, 8, 1]", kOut, "  callbacks:\n" + checkpoint + "    - {type: TensorBoard, log_dir: '" + dir +
                                          "'}\n")
              .empty());
  }
  // A checkpoint's stored config with such a log_dir still loads: predict, evaluate and export build their towers
  // From it, which check the model alone (the towers refused it).
  const Config stored = parse_config("model:\n  layers:\n    - {type: Input, shape: [4, 4, 1]}\n    - " + kOut +
                                         "\ndata: {images: a, masks: b}\ntraining:\n  callbacks:\n"
                                         "    - {type: TensorBoard, log_dir: final.h5}\n",
                                     "v.yaml");
  Model m(stored.model, stored.path);
  CHECK_NOTHROW(validate_for_training(stored, m));
  CHECK_THROWS_WITH(check_callback_files(stored), Catch::Contains("'log_dir' 'final.h5' is (or lies in)"));
}

TEST_CASE("Keras's MeanIoU needs a categorical model and AUC a binary one", "[validate][metrics]") {
  const auto error = [](const std::string& out, const std::string& loss, const std::string& metric) {
    Config c = parse_config("model:\n  layers:\n    - {type: Input, shape: [4, 4, 1]}\n    - " + out +
                                "\ndata: {images: a, masks: b}\ntraining: {epochs: 1, loss: " + loss +
                                ", metrics: [" + metric + "]}\n",
                            "v.yaml");
    Model m(c.model, c.path);
    try {
      validate_for_training(c, m);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string softmax = "{type: Conv2D, filters: 3, kernel_size: 1, activation: softmax}";
  const std::string sparse = "sparse_categorical_crossentropy";
  CHECK(error(softmax, sparse, "MeanIoU").empty());
  CHECK(error(kOut, "binary_crossentropy", "AUC").empty());
  CHECK_THAT(error(kOut, "binary_crossentropy", "MeanIoU"),
             Catch::Contains("v.yaml:6:") && Catch::Contains("'MeanIoU' needs a categorical loss") &&
                 Catch::Contains("Use BinaryIoU"));
  CHECK_THAT(error(softmax, sparse, "AUC"),
             Catch::Contains("'auc' is for binary masks, not the 3 classes of loss 'sparse_categorical_crossentropy'"));
}
