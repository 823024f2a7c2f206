// Config loading: every kind of mistake a user can make in the YAML gives a
// UserError naming file:line:col and the fix; good configs give the values and
// Keras defaults of config.h.
#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

#include <fstream>

#include "config/config.h"
#include "nn/model.h"
#include "nn/registry.h"
#include "config/sections.h"
#include "core/error.h"
#include "train/lr_schedule.h"

using namespace trainer;

namespace {

// A valid config; the table below edits one line of it (line numbers on the right).
const std::string kGood =
    "model:\n"                                          // 1
    "  name: tiny\n"                                    // 2
    "  layers:\n"                                       // 3
    "    - type: Input\n"                                // 4
    "      shape: [8, 8, 3]\n"                           // 5
    "    - type: Conv2D\n"                               // 6
    "      name: c1\n"                                   // 7
    "      filters: 4\n"                                 // 8
    "      kernel_size: 3\n"                             // 9
    "      padding: same\n"                              // 10
    "    - type: MaxPooling2D\n"                         // 11
    "    - type: Conv2DTranspose\n"                      // 12
    "      filters: 4\n"                                 // 13
    "      kernel_size: 2\n"                             // 14
    "      strides: 2\n"                                 // 15
    "    - type: Concatenate\n"                          // 16
    "      inputs: [conv2d_transpose_1, c1]\n"           // 17
    "    - type: Conv2D\n"                               // 18
    "      filters: 1\n"                                 // 19
    "      kernel_size: 1\n"                             // 20
    "      activation: sigmoid\n"                        // 21
    "data:\n"                                           // 22
    "  images: imgs\n"                                  // 23
    "  masks: msks\n"                                   // 24
    "  validation_split: 0.1\n"                         // 25
    "training:\n"                                       // 26
    "  epochs: 3\n"                                     // 27
    "  batch_size: 4\n"                                 // 28
    "  seed: 7\n"                                       // 29
    "  loss: binary_crossentropy\n"                     // 30
    "  metrics: [mean_iou]\n"                           // 31
    "  optimizer: {type: SGD, learning_rate: 0.05, momentum: 0.9}\n"                // 32
    "  callbacks:\n"                                                                // 33
    "    - {type: EarlyStopping, monitor: val_mean_iou, mode: max, patience: 2}\n"  // 34
    "    - {type: ModelCheckpoint, filepath: best.h5, save_best_only: true}\n"      // 35
    "  output_dir: out\n";                                                          // 36

// base with the first occurrence of `from` replaced by `to` (which must exist).
std::string edit(const std::string& from, const std::string& to, std::string s = kGood) {
  size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

std::string error_of(const std::string& text) {
  try {
    const Config c = parse_config(text, "cfg.yaml");
    Model model(c.model, "cfg.yaml");  // the layers' types and keys, as every command checks them
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("config: initial_epoch and validation_freq as Keras's fit() takes them", "[config]") {
  Config c = parse_config(kGood, "cfg.yaml");
  CHECK(c.training.initial_epoch == 0);
  CHECK((c.training.validates(1) && c.training.validates(2)));
  c = parse_config(edit("epochs: 3", "epochs: 3\n  initial_epoch: 2\n  validation_freq: 2"), "cfg.yaml");
  CHECK(c.training.initial_epoch == 2);
  CHECK((!c.training.validates(1) && c.training.validates(2) && !c.training.validates(3) && c.training.validates(4)));
  c = parse_config(edit("epochs: 3", "epochs: 3\n  validation_freq: [1, 3]"), "cfg.yaml");
  CHECK((c.training.validates(1) && !c.training.validates(2) && c.training.validates(3)));
  CHECK_THAT(error_of(edit("epochs: 3", "epochs: 3\n  validation_freq: [5]")),
             Catch::Contains("'validation_freq' names no epoch this run trains (1 to 3), so it would never validate"));
  // {type: AUC} alone is the name, as optimizers and callbacks are written.
  c = parse_config(edit("metrics: [mean_iou]", "metrics: [mean_iou, {type: AUC}, BinaryIoU]"), "cfg.yaml");
  CHECK(c.training.metrics == std::vector<std::string>{"mean_iou", "auc", "binary_io_u"});
}

TEST_CASE("config: a UTF-8 byte order mark and a quoted value folded over lines read as YAML", "[config]") {
  // yaml-cpp skips the mark but places its values 3 bytes earlier: the quote check looked at the wrong bytes.
  const std::string quoted = edit("metrics: [mean_iou]", "metrics: ['mean_iou', 'dice']");
  CHECK(parse_config("\xEF\xBB\xBF" + quoted, "cfg.yaml").training.metrics ==
        std::vector<std::string>{"mean_iou", "dice"});
  // PyYAML's dump folds a long quoted string over lines: legal, and no config swallowed.
  const Config c = parse_config(edit("  name: tiny\n", "  name: 'a tiny model whose name\n    goes on'\n"), "cfg.yaml");
  CHECK(c.model.name == "a tiny model whose name goes on");
}

TEST_CASE("config: each mistake is reported at its file:line:col with the fix", "[config]") {
  struct Row {
    const char* what;
    std::string text;
    std::string expected;
  };
  const std::vector<Row> rows = {
      {"unknown key with did-you-mean", edit("  validation_split: 0.1", "  shufle: false"),
       "cfg.yaml:25:3: data: unknown key 'shufle' (did you mean 'shuffle'?)"},
      // Keys the reader only looks for (validation_images) were missing from the suggestions.
      {"did-you-mean for a key that is only looked for", edit("  validation_split: 0.1", "  validation_image: v"),
       "cfg.yaml:25:3: data: unknown key 'validation_image' (did you mean 'validation_images'?)"},
      {"did-you-mean for ModelCheckpoint's optional monitor",
       edit("callbacks:\n", "callbacks:\n    - {type: ModelCheckpoint, filepath: b.h5, moniter: val_loss}\n"),
       "unknown key 'moniter' (did you mean 'monitor'?)"},
      // A misspelt loss was not matched to 'loss', which the known keys left out.
      {"did-you-mean for the loss", edit("loss: binary_crossentropy", "losss: binary_crossentropy"),
       "training: unknown key 'losss' (did you mean 'loss'?)"},
      {"unknown top-level section", kGood + "logging: {level: info}\n",
       "cfg.yaml:37:1: config: unknown key 'logging'; known keys: data, model, training"},
      {"wrong type", edit("epochs: 3", "epochs: three"),
       "cfg.yaml:27:11: training: 'epochs' must be an integer, got 'three'"},
      {"an initial_epoch that leaves nothing to train", edit("epochs: 3", "epochs: 3\n  initial_epoch: 3"),
       "cfg.yaml:28:18: training: 'initial_epoch' is 3, which leaves no epoch to train: epochs (3) is the last "
       "epoch, counted from the start as in Keras's fit(); e.g. epochs: 6 trains 3 more"},
      {"a validation_freq of no epoch", edit("epochs: 3", "epochs: 3\n  validation_freq: 0"),
       "cfg.yaml:28:20: training: 'validation_freq' must be in [1, "},
      {"a validation_freq list with a non-epoch", edit("epochs: 3", "epochs: 3\n  validation_freq: [1, two]"),
       "training: 'validation_freq' must be a whole number of epochs (2: after every second epoch) or a list of "
       "epochs (1-based, e.g. [1, 5, 10]), got the entry 'two'"},
      {"a validation_freq without validation data",
       edit("epochs: 3", "epochs: 3\n  validation_freq: 2", edit("  validation_split: 0.1\n", "")),
       "training: 'validation_freq' says when to validate, but there is no validation data; set "
       "data.validation_split"},
      // Messages that pointed the wrong way.
      {"an integer past int's range is out of range, not a non-integer",
       edit("batch_size: 4", "batch_size: 4000000000"),
       "cfg.yaml:28:15: training: 'batch_size' must be in [1, 2147483647], got 4000000000"},
      {"a zero learning rate printed as written", edit("learning_rate: 0.05", "learning_rate: 0.0"),
       "training.optimizer (SGD): 'learning_rate' must be greater than 0, got 0"},
      {"a misspelt section is placed at its own line", edit("training:\n", "trainig:\n"),
       "cfg.yaml:26:1: config: section 'training' is missing; add 'training:' with at least 'epochs: <n>' "
       "('trainig' is there: did you mean 'training'?)"},
      {"a forward reference says the layer comes later",
       edit("inputs: [conv2d_transpose_1, c1]", "inputs: [out, c1]",
            edit("    - type: Conv2D\n      filters: 1", "    - type: Conv2D\n      name: out\n      filters: 1")),
       "cfg.yaml:17:15: model.layers[4]: 'inputs' names 'out', which is defined later (line 18); a layer reads "
       "only layers above it: move 'out' before this one"},
      {"a case variant of a Keras alias", edit("type: MaxPooling2D", "type: MaxPool2d"),
       "'type' is 'MaxPool2d', not a known layer type (did you mean 'MaxPooling2D'?)"},
      {"a NUL byte is named where it is", edit("  seed: 7\n", std::string("  seed: 7\0\n", 11)),
       "cfg.yaml:29:10: a NUL byte, which YAML text never holds (a binary file, or text saved as UTF-16?)"},
      {"an unclosed quote is named, not the value it swallowed", edit("loss: binary_crossentropy", "loss: 'binary_crossentropy"),
       "cfg.yaml:30:9: this quote (') is not closed on its line; YAML then takes everything up to the end of the "
       "file (yaml-cpp closes it there) as the value: close it, or leave the quotes out"},
      {"a quote closed on a later line", edit("seed: 7", "seed: \"7\n  loss: x\""),
       "cfg.yaml:29:9: this quote (\") is not closed on its line; YAML then takes everything up to the next one, "
       "on line 30 as the value"},
      {"Keras's model.to_json() as the config",
       "{\"class_name\": \"Functional\", \"config\": {\"layers\": []}, \"keras_version\": \"3.15.1\"}",
       "cfg.yaml is a Keras model (model.to_json()'s JSON), not a trainer config: convert it with 'trainer import "
       "cfg.yaml --output model.yaml'"},
      {"out of range int", edit("batch_size: 4", "batch_size: 0"),
       "cfg.yaml:28:15: training: 'batch_size' must be in [1, "},
      {"steps_per_epoch 0", edit("batch_size: 4", "batch_size: 4\n  steps_per_epoch: 0"),
       "cfg.yaml:29:20: training: 'steps_per_epoch' must be in [1, "},
      {"out of range real", edit("validation_split: 0.1", "validation_split: 1"),
       "cfg.yaml:25:21: data: 'validation_split' must be in [0, 1), the fraction of pairs held out (e.g. 0.1), got 1"},
      {"a validation_split above 1", edit("validation_split: 0.1", "validation_split: 10"),
       "data: 'validation_split' must be in [0, 1), the fraction of pairs held out (e.g. 0.1), got 10"},
      {"a training setting under data", edit("  validation_split: 0.1\n", "  validation_split: 0.1\n  batch_size: 8\n"),
       "cfg.yaml:26:15: data: 'batch_size' is a training setting here; move it to the training section: "
       "training.batch_size"},
      {"negative seed", edit("seed: 7", "seed: -7"),
       "cfg.yaml:29:9: training: 'seed' must be a non-negative integer"},
      {"empty value (placed at its key, not at the next line)", edit("seed: 7", "seed:"),
       "cfg.yaml:29:3: training: 'seed' has no value"},
      {"empty choice lists the choices", edit("loss: binary_crossentropy", "loss:"),
       "training: 'loss' has no value; use one of: binary_crossentropy, dice, bce_dice, "
       "binary_focal_crossentropy, sparse_categorical_crossentropy, categorical_crossentropy, "
       "categorical_focal_crossentropy, tversky, BinaryCrossentropy, BinaryFocalCrossentropy"},
      {"unknown layer type", edit("type: MaxPooling2D", "type: MaxPoling2D"),
       "cfg.yaml:11:13: model.layers[2]: 'type' is 'MaxPoling2D', not a known layer type (did "
       "you mean 'MaxPooling2D'?); known types: Input, Rescaling, Conv2D"},
      // Keras's own spellings.
      {"Keras's get_config name of the Input", edit("type: Input\n", "type: InputLayer\n"),
       "'type' is 'InputLayer' but the first layer must be Input (InputLayer is what Keras's get_config calls the Input: "
       "write {type: Input, shape: [H, W, C]}, its batch_shape without the batch)"},
      {"PyTorch spelling of a layer type", edit("type: MaxPooling2D", "type: MaxPooling2d"),
       "'type' is 'MaxPooling2d', not a known layer type (did you mean 'MaxPooling2D'?)"},
      {"snake_case callback", edit("type: EarlyStopping", "type: early_stopping"),
       "'type' is 'early_stopping' (did you mean 'EarlyStopping'?)"},
      {"Keras mixed precision policy", edit("  seed: 7\n", "  precision: mixed_bfloat16\n"),
       "'precision' is 'mixed_bfloat16' (did you mean 'bf16'?)"},
      {"Keras's class_name for type", edit("{type: EarlyStopping,", "{class_name: EarlyStopping,"),
       "'type' is required; add 'type: <value>' ('class_name' is there: did you mean 'type'?)"},
      {"Keras's get_config name of an optimizer", edit("{type: SGD,", "{name: sgd,"),
       "cfg.yaml:32:14: training.optimizer: 'type' is required; the class goes in 'type' (e.g. 'type: Adam'), "
       "not in 'name'"},
      {"a callback named in 'name'", edit("{type: EarlyStopping,", "{name: EarlyStopping,"),
       "training.callbacks[0]: 'type' is required; the class goes in 'type' (e.g. 'type: EarlyStopping')"},
      {"a Keras 3 .keras checkpoint name", edit("filepath: best.h5", "filepath: ck/best.keras"),
       "'filepath' 'ck/best.keras': checkpoints are HDF5 files (docs/checkpoint.md), not Keras 3's .keras "
       "archives; name it 'ck/best.h5'"},
      {"a second YAML document", kGood + "---\nmodel: {}\n",
       "cfg.yaml: the file holds more than one YAML document (a line '---' starts another)"},
      // yaml-cpp's LoadAll takes a ',' where a document's value begins as empty documents without end (found by
      // tests/fuzz: the memory grew until the process was killed).
      {"a ',' where the top-level value begins", "  , {model: {}}\n",
       "cfg.yaml:1:3: YAML syntax error: a value cannot begin with ',' here (',' separates the entries of [ ] and { })"},
      {"a ',' after a top-level list", "- model: {}\n,\n",
       "cfg.yaml:2:1: YAML syntax error: a value cannot begin with ','"},
      {"a control byte in the YAML error", edit("seed: 7", "seed: \"\\\x01\""),
       "YAML syntax error: unknown escape character: \\x01"},
      {"an empty inputs list", edit("[conv2d_transpose_1, c1]", "[]"),
       "cfg.yaml:17:15: model.layers[4]: 'inputs' is an empty list; name the layers this one reads"},
      {"a NUL in the checkpoint name", edit("filepath: best.h5", "filepath: \"a\\0b.h5\""),
       "'filepath' holds a control character (such as \\0 or a newline)"},
      {"a NUL in the output folder", edit("  output_dir: out\n", "  output_dir: \".\\0x\"\n"),
       "training: 'output_dir' holds a control character (such as \\0 or a newline), which a path cannot hold "
       "safely"},
      {"a newline in the images folder", edit("  images: imgs\n", "  images: \"imgs\\nmore\"\n"),
       "data: 'images' holds a control character"},
      {"a number above the finite bounds", edit("learning_rate: 0.05", "learning_rate: 1e308"),
       "'learning_rate' must be in [0, 1e+300], got 1e308"},
      {"two Python tuples in one { } layer",
       edit("    - type: MaxPooling2D\n",
            "    - {type: Conv2D, filters: 4, kernel_size: (2, 2), strides: (2, 2)}\n    - type: MaxPooling2D\n"),
       "cfg.yaml:11:68: duplicate key '2)' (first given at line 11); 'strides: (2, 2)' is a Python tuple, whose comma "
       "splits a { } entry in two ('strides: (2' and a key '2)'): write it as a YAML list, strides: [2, 2]"},
      {"the images folder under another name", edit("  images: imgs\n", "  train_images: imgs\n"),
       "data: 'images' is required; add 'images: <value>' ('train_images' is there: did you mean 'images'?)"},
      {"three Python tuples in one { } layer",
       edit("    - type: MaxPooling2D\n", "    - {type: Conv2D, filters: 4, kernel_size: (3, 3), strides: (2, 2), "
                                         "dilation_rate: (2, 2)}\n    - type: MaxPooling2D\n"),
       "duplicate key '2)' (first given at line 11); 'dilation_rate: (2, 2)' is a Python tuple"},
      {"a Python tuple of three in one { } layer",
       edit("    - type: MaxPooling2D\n", "    - {type: Conv2D, filters: 4, kernel_size: (3, 3, 3), strides: (2, 2, 3)}\n"
                                         "    - type: MaxPooling2D\n"),
       "duplicate key '3)' (first given at line 11); a Python tuple in { } is split at its commas into entries; write "
       "tuples as YAML lists, e.g. [2, 2]"},
      {"the data section under another name", edit("data:\n", "dataset:\n"),
       "section 'data' is missing; add 'data:' with 'images: <folder>' and 'masks: <folder>' ('dataset' is there: "
       "did you mean 'data'?)"},
      {"the devices in the config", edit("  seed: 7\n", "  seed: 7\n  gpus: 2\n"),
       "training: 'gpus' is the command-line flag --gpus here (e.g. trainer --config unet.yaml --gpus all), not a "
       "config key; remove it"},
      {"a tab in the indentation", edit("  seed: 7\n", "\tseed: 7\n"),
       "YAML syntax error: "},
      {"a tab in the indentation, named", edit("  seed: 7\n", "\tseed: 7\n"),
       "(line 29 is indented with a tab; YAML allows only spaces there)"},
      // The error pointed past the file's end.
      {"an unclosed quote in a flow mapping, named",
       edit("callbacks:\n", "callbacks:\n    - {type: ModelCheckpoint, filepath: \"ep{epoch}.h5, note: \"#1\"}\n"),
       "(line 34 opens a \" that it does not close)"},
      {"duplicate layer name", edit("      filters: 1\n", "      name: c1\n"),
       "cfg.yaml:19:13: model.layers[5]: 'name' is 'c1', already the name of the layer at line 6"},
      {"input naming no layer", edit("[conv2d_transpose_1, c1]", "[conv2d_transpose_1, c2]"),
       "cfg.yaml:17:15: model.layers[4]: 'inputs' names 'c2', which is not a layer defined "
       "before this one (did you mean 'c1'?)"},
      {"input naming a later layer", edit("[conv2d_transpose_1, c1]", "[conv2d_1, c1]"),
       "cfg.yaml:17:15: model.layers[4]: 'inputs' names 'conv2d_1', which is not a layer "
       "defined before this one"},
      {"first layer not Input", edit("type: Input\n      shape: [8, 8, 3]", "type: Rescaling"),
       "cfg.yaml:4:13: model.layers[0]: 'type' is 'Rescaling' but the first layer must be Input"},
      {"second Input", edit("type: MaxPooling2D", "type: Input"),
       "cfg.yaml:11:13: model.layers[2]: 'type' is 'Input', which only the first layer may be"},
      {"layer without type", edit("    - type: MaxPooling2D", "    - pool_size: 2"),
       "cfg.yaml:11:7: model.layers[2]: 'type' is required; add 'type: <value>'"},
      {"bad layer name", edit("name: c1", "name: c 1/x"),
       "cfg.yaml:7:13: model.layers[1]: 'name' is 'c 1/x'; use letters, digits"},
      {"missing section", edit("data:\n  images: imgs\n  masks: msks\n  validation_split: 0.1\n", ""),
       "cfg.yaml:1:1: config: section 'data' is missing; add 'data:' with 'images: <folder>'"},
      {"missing required key", edit("  images: imgs\n", ""),
       "cfg.yaml:23:3: data: 'images' is required; add 'images: <value>'"},
      {"a fraction written as arithmetic", edit("learning_rate: 0.05", "learning_rate: 1/20"),
       "'learning_rate' must be a number, got '1/20' (YAML does no arithmetic: write 0.05)"},
      {"an unsupported Keras optimizer argument", edit("{type: SGD,", "{type: Adam, use_ema: true,"),
       "'use_ema' is a Keras optimizer argument that is not supported"},
      {"amsgrad on SGD", edit("{type: SGD,", "{type: SGD, amsgrad: true,"),
       "'amsgrad' is an argument of Keras's Adam and AdamW, not of SGD; remove it or change the type"},
      {"centered on Adam", edit("{type: SGD,", "{type: Adam, centered: true,"),
       "'centered' is an argument of Keras's RMSprop, not of Adam"},
      {"a Keras callback trainer covers itself", edit("callbacks:\n", "callbacks:\n    - {type: CSVLogger, filename: log.csv}\n"),
       "'type' is Keras's CSVLogger: trainer always writes <output_dir>/log.csv in CSVLogger's format"},
      {"TensorBoard's log_dir outside the output folder",
       edit("callbacks:\n", "callbacks:\n    - {type: TensorBoard, log_dir: ../logs}\n"),
       "training.callbacks[0] (TensorBoard): 'log_dir' '../logs' leaves the output folder; it is a name inside "
       "training.output_dir"},
      {"TensorBoard's update_freq 0", edit("callbacks:\n", "callbacks:\n    - {type: TensorBoard, update_freq: 0}\n"),
       "training.callbacks[0] (TensorBoard): 'update_freq' must be in [1, "},
      {"TensorBoard's update_freq as another word",
       edit("callbacks:\n", "callbacks:\n    - {type: TensorBoard, update_freq: step}\n"),
       "training.callbacks[0] (TensorBoard): 'update_freq' is 'step'; use 'epoch' (values at each epoch's end), "
       "'batch' (every step) or a number of steps, e.g. 100"},
      {"Keras 2's write_grads", edit("callbacks:\n", "callbacks:\n    - {type: TensorBoard, write_grads: false}\n"),
       "'write_grads' is Keras 2's gradient histograms, which TensorFlow 2's Keras dropped"},
      {"TensorBoard's write_images", edit("callbacks:\n", "callbacks:\n    - {type: TensorBoard, write_images: true}\n"),
       "'write_images' is true, which draws each weight as an image; that is not supported: the weights' histograms "
       "are (histogram_freq)"},
      {"TensorBoard's profile_batch", edit("callbacks:\n", "callbacks:\n    - {type: TensorBoard, profile_batch: [10, 20]}\n"),
       "'profile_batch' is [10, 20]; profiling through TensorBoard is not supported"},
      {"TensorBoard's embeddings_freq", edit("callbacks:\n", "callbacks:\n    - {type: TensorBoard, embeddings_freq: 1}\n"),
       "'embeddings_freq' must be 0: the Projector's embeddings need an Embedding layer"},
      {"two TensorBoards",
       edit("callbacks:\n", "callbacks:\n    - {type: TensorBoard}\n    - {type: TensorBoard, log_dir: tb}\n"),
       "training.callbacks[1] (TensorBoard): 'type' is TensorBoard again; give at most one TensorBoard"},
      {"a fit() argument under training", edit("  seed: 7\n", "  seed: 7\n  validation_split: 0.2\n"),
       "cfg.yaml:30:21: training: 'validation_split' is a data setting here (Keras's fit() argument); move it to the "
       "data section: data.validation_split"},
      {"a loss written as Python", edit("loss: binary_crossentropy", "loss: keras.losses.BinaryFocalCrossentropy(gamma=2.0, from_logits=True)"),
       "which is Python; write the mapping {type: BinaryFocalCrossentropy, gamma: 2.0, from_logits: true}"},
      {"an optimizer written as Python with its rate positional",
       edit("{type: SGD, learning_rate: 0.05, momentum: 0.9}", "'tf.keras.optimizers.Adam(1e-4)'"),
       "is Python; write the mapping {type: Adam, learning_rate: 1e-4}"},
      {"an optimizer written as Python with Keras 2's lr", edit("{type: SGD, learning_rate: 0.05, momentum: 0.9}", "'Adam(lr=1e-4)'"),
       "is Python; write the mapping {type: Adam, learning_rate: 1e-4}"},
      {"a loss written as Python with a positional argument", edit("loss: binary_crossentropy", "loss: 'MyLoss(3, w=2)'"),
       "write the mapping {type: MyLoss, w: 2} (with the key of each positional argument: 3)"},
      {"an optimizer written as Python", edit("{type: SGD, learning_rate: 0.05, momentum: 0.9}", "'keras.optimizers.Adam(learning_rate=1e-3, clipnorm=1.0)'"),
       "is Python; write the mapping {type: Adam, learning_rate: 1e-3, clipnorm: 1.0}"},
      {"a metric as a mapping", edit("metrics: [mean_iou]", "metrics: [{type: MeanIoU, num_classes: 2}]"),
       "'MeanIoU' is written with arguments; trainer's metrics take none: write its name (BinaryIoU: the mean IoU "
       "of both classes at threshold 0.5)"},
      {"AUC with arguments", edit("metrics: [mean_iou]", "metrics: [{type: AUC, num_thresholds: 100}]"),
       "'AUC' is written with arguments; trainer's metrics take none: write its name (AUC: Keras's AUC() with its "
       "defaults, 200 thresholds and curve ROC; other arguments are not offered)"},
      {"two gradient clippings", edit("{type: SGD,", "{type: SGD, clipnorm: 1.0, clipvalue: 0.5,"),
       "'clipvalue' is given with 'clipnorm'; only one of clipnorm, clipvalue and global_clipnorm can be set"},
      {"beta_1 of 1", edit("{type: SGD, learning_rate: 0.05, momentum: 0.9}", "{type: Adam, beta_1: 1}"),
       "training.optimizer (Adam): 'beta_1' must be in [0, 1) (Adam divides by 1 - beta_1^t), got 1"},
      {"beta_2 above 1", edit("{type: SGD, learning_rate: 0.05, momentum: 0.9}", "{type: Adam, beta_2: 1.5}"),
       "training.optimizer (Adam): 'beta_2' must be in [0, 1) (Adam divides by 1 - beta_2^t), got 1.5"},
      {"a negative clipnorm", edit("{type: SGD,", "{type: SGD, global_clipnorm: -1,"),
       "'global_clipnorm' must be in [0"},
      {"optimizer key of another type", edit("{type: SGD,", "{type: Adam,"),
       "cfg.yaml:32:48: training.optimizer (Adam): unknown key 'momentum'; known keys: amsgrad, beta_1, "
       "beta_2, clipnorm, clipvalue, decay, epsilon, global_clipnorm, learning_rate, type"},
      {"unknown optimizer name", edit("{type: SGD, learning_rate: 0.05, momentum: 0.9}", "nadam"),
       "cfg.yaml:32:14: training.optimizer: 'nadam' is not an optimizer (did you mean 'Adam'?)"},
      {"unknown optimizer type", edit("{type: SGD,", "{type: Adagrad,"),
       "cfg.yaml:32:21: training.optimizer: 'type' is 'Adagrad'; use one of: SGD, Adam, AdamW, RMSprop"},
      {"zero learning rate", edit("learning_rate: 0.05", "learning_rate: 0"),
       "cfg.yaml:32:41: training.optimizer (SGD): 'learning_rate' must be greater than 0"},
      {"monitor typo", edit("monitor: val_mean_iou", "monitor: val_mean_iuo"),
       "cfg.yaml:34:38: training.callbacks[0] (EarlyStopping): 'monitor' is 'val_mean_iuo' (did "
       "you mean 'val_mean_iou'?); it must be the loss or a metric listed in training.metrics: "
       "loss, mean_iou, val_loss, val_mean_iou"},
      {"monitor of a metric not configured", edit("monitor: val_mean_iou", "monitor: val_dice"),
       "'monitor' is 'val_dice', but 'dice' is not in training.metrics; add it there (metrics: [dice]) or "
       "monitor one of: loss, mean_iou, val_loss, val_mean_iou"},
      {"Keras's Lambda for 1/255", edit("type: MaxPooling2D", "type: Lambda"),
       "'type' is 'Lambda', not a known layer type (for Lambda(lambda x: x / 255) use {type: Rescaling"},
      {"Python's None for a number", edit("learning_rate: 0.05", "learning_rate: None"),
       "'learning_rate' must be a number, got 'None' (Python's None is YAML's null)"},
      {"val_ monitor without validation data", edit("  validation_split: 0.1\n", ""),
       "cfg.yaml:33:38: training.callbacks[0] (EarlyStopping): 'monitor' is 'val_mean_iou', "
       "which needs validation data; set data.validation_split"},
      {"bad mode", edit("mode: max", "mode: maximum"),
       "cfg.yaml:34:58: training.callbacks[0] (EarlyStopping): 'mode' is 'maximum'"},
      {"two EarlyStopping", edit("{type: ModelCheckpoint, filepath: best.h5, save_best_only: true}",
                                 "{type: EarlyStopping}"),
       "cfg.yaml:35:14: training.callbacks[1] (EarlyStopping): 'type' is EarlyStopping again"},
      {"best-only checkpoint without validation data",
       edit("monitor: val_mean_iou", "monitor: loss", edit("  validation_split: 0.1\n", "")),
       "cfg.yaml:34:7: training.callbacks[1] (ModelCheckpoint): 'monitor' is 'val_loss', which needs "
       "validation data"},
      {"checkpoint outside the output folder", edit("filepath: best.h5", "filepath: /tmp/best.h5"),
       "cfg.yaml:35:41: training.callbacks[1] (ModelCheckpoint): 'filepath' '/tmp/best.h5' leaves the output folder"},
      {"Keras 2's period", edit("save_best_only: true}", "save_best_only: true, period: 5}"),
       "'period' is Keras 2's ModelCheckpoint(period=...), saving every N epochs, which is not supported"},
      {"a callback written as Python",
       edit("    - {type: EarlyStopping", "    - 'EarlyStopping(patience=5)'\n    - {type: EarlyStopping"),
       "training.callbacks[0]: 'EarlyStopping(patience=5)' is Python; write the mapping {type: EarlyStopping, "
       "patience: 5}"},
      {"a callback trainer covers itself, as a string",
       edit("    - {type: EarlyStopping", "    - TerminateOnNaN\n    - {type: EarlyStopping"),
       "training.callbacks[0]: 'TerminateOnNaN' is Keras's TerminateOnNaN: trainer always stops at a non-finite "
       "training loss"},
      {"a callback's bare name", edit("    - {type: EarlyStopping", "    - TensorBoard\n    - {type: EarlyStopping"),
       "training.callbacks[0]: 'TensorBoard' is not a mapping; write {type: TensorBoard} with its keys"},
      {"Python's None for the seed", edit("seed: 7", "seed: None"),
       "'seed' must be a non-negative integer, got 'None' (Python's None is YAML's null, which leaves the default 0)"},
      {"Keras's list of losses", edit("loss: binary_crossentropy", "loss: [binary_crossentropy, dice]"),
       "a list gives one loss per output, and the model has one: write one loss (bce_dice adds binary_crossentropy "
       "and dice)"},
      {"a lower-case optimizer written as Python", edit("{type: SGD, learning_rate: 0.05, momentum: 0.9}", "'adam(1e-4)'"),
       "write the mapping {type: adam, learning_rate: 1e-4}"},
      {"a mask suffix with its extension", edit("  masks: msks\n", "  masks: msks\n  mask_suffix: _mask.png\n"),
       "'mask_suffix' is '_mask.png', which ends in a file extension; it is the end of a mask's name before the "
       "extension (any image type is read): write '_mask'"},
      {"a metric written as Python", edit("metrics: [mean_iou]", "metrics: ['tf.keras.metrics.MeanIoU(num_classes=3)']"),
       "(write Keras's class name alone, MeanIoU with a categorical loss or BinaryIoU with a binary one: the number "
       "of classes comes from the model; docs/config.md); use any of: mean_iou, dice, accuracy, mean_io_u, precision, "
       "recall, binary_iou, binary_accuracy, binary_io_u, auc"},
      {"a save_freq in batches", edit("save_best_only: true}", "save_best_only: true, save_freq: 100}"),
       "cfg.yaml:35:83: training.callbacks[1] (ModelCheckpoint): 'save_freq' is 100; only 'epoch' (Keras's default) "
       "is supported: checkpoints are written at the end of each epoch"},
      {"checkpoint above the output folder", edit("filepath: best.h5", "filepath: ../best.h5"),
       "'filepath' '../best.h5' leaves the output folder; it is a name inside training.output_dir"},
      {"checkpoint named as a folder", edit("filepath: best.h5", "filepath: ck/"),
       "'filepath' 'ck/' names a folder; end it with a file name, e.g. 'ck/best-{epoch:02d}.h5'"},
      {"checkpoint named as the folder itself", edit("filepath: best.h5", "filepath: 'ck/.'"),
       "'filepath' 'ck/.' names a folder; end it with a file name, e.g. 'ck/best-{epoch:02d}.h5'"},

      {"checkpoint without filepath", edit("filepath: best.h5, ", ""),
       "cfg.yaml:35:7: training.callbacks[1] (ModelCheckpoint): 'filepath' is required; add 'filepath: "},
      {"unknown callback", edit("type: EarlyStopping", "type: EarlyStoping"),
       "cfg.yaml:34:14: training.callbacks[0]: 'type' is 'EarlyStoping' (did you mean "
       "'EarlyStopping'?)"},
      {"bad loss", edit("loss: binary_crossentropy", "loss: binary_crossentopy"),
       "cfg.yaml:30:9: training: 'loss' is 'binary_crossentopy' (did you mean "
       "'binary_crossentropy'?); use one of: binary_crossentropy, dice, bce_dice"},
      {"bad metric", edit("[mean_iou]", "[mean_iou, iou]"),
       "cfg.yaml:31:23: training.metrics: 'iou' is not a metric; use any of: mean_iou, dice, "
       "accuracy"},
      {"syntax error", edit("metrics: [mean_iou]", "metrics: [mean_iou"),
       "cfg.yaml:32:12: YAML syntax error: "},
      {"bad indentation", edit("  masks: msks", "   masks: msks"), "cfg.yaml:24:9: YAML syntax error: "},
      {"duplicate key", edit("  epochs: 3\n", "  epochs: 3\n  epochs: 4\n"),
       "cfg.yaml:28:3: duplicate key 'epochs' (first given at line 27); keep only one"},
      {"a YAML merge key", edit("{type: SGD, learning_rate: 0.05, momentum: 0.9}", "{<<: &sgd {type: SGD}, momentum: 0.9}"),
       "cfg.yaml:32:15: merge keys ('<<: *anchor') are not supported by the config reader (yaml-cpp): write the keys "
       "out"},
      {"a quoted '<<', a plain key", edit("{type: SGD, learning_rate: 0.05, momentum: 0.9}", "{type: SGD, '<<': 1}"),
       "cfg.yaml:32:26: training.optimizer (SGD): unknown key '<<'"},
      {"section not a mapping", edit("data:\n  images: imgs\n  masks: msks\n  validation_split: 0.1",
                                     "data: [imgs, msks]"),
       "cfg.yaml:22:7: data: expected a mapping of 'key: value' pairs"},
      {"empty file", "", "cfg.yaml: the config is empty"},
      {"Keras 2's lr", edit("learning_rate: 0.05", "lr: 0.05"),
       "cfg.yaml:32:26: training.optimizer (SGD): unknown key 'lr' (did you mean 'learning_rate'?)"},
      {"a notebook's dice_loss", edit("loss: binary_crossentropy", "loss: dice_loss"),
       "'loss' is 'dice_loss' (did you mean 'dice'?)"},
      {"Keras's acc", edit("[mean_iou]", "[acc]"),
       "cfg.yaml:31:13: training.metrics: 'acc' is not a metric (did you mean 'accuracy'?)"},
      {"non-scalar key", edit("  seed: 7\n", "  seed: 7\n  [a]: 1\n"),
       "cfg.yaml:30:3: a key must be a plain name, not a list or mapping"},
  };
  REQUIRE(rows.size() >= 15);
  for (const auto& row : rows) {
    INFO(row.what);
    CHECK_THAT(error_of(row.text), Catch::Matchers::Contains(row.expected));
  }
  // Keras 2's default period 1 is every epoch, as here.
  CHECK(parse_config(edit("save_best_only: true}", "save_best_only: true, period: 1}"), "cfg.yaml")
            .training.model_checkpoint.enabled);
  // save_weights_only (false by default, as Keras's) and Keras's default save_freq.
  CHECK_FALSE(parse_config(edit("save_best_only: true}", "save_best_only: true, save_weights_only: false}"),
                           "cfg.yaml").training.model_checkpoint.save_weights_only);
  CHECK(parse_config(edit("save_best_only: true}", "save_best_only: true, save_weights_only: true, save_freq: epoch}"),
                     "cfg.yaml").training.model_checkpoint.save_weights_only);
}

TEST_CASE("config: Keras's aliases of a layer class give that class and its default names", "[config]") {
  std::string text = edit("    - type: MaxPooling2D\n", "    - type: MaxPool2D\n");
  text = edit("    - type: Conv2DTranspose\n", "    - type: Convolution2DTranspose\n", text);
  const Config c = parse_config(text, "cfg.yaml");
  REQUIRE(c.model.layers.size() == 6);
  CHECK(c.model.layers[2].type == "MaxPooling2D");
  CHECK(c.model.layers[2].name == "max_pooling2d_1");
  CHECK(c.model.layers[3].type == "Conv2DTranspose");
  CHECK(c.model.layers[3].name == "conv2d_transpose_1");
  for (const char* alias : {"AvgPool2D", "GlobalAvgPool2D", "GlobalMaxPool2D", "Convolution2D"})
    CHECK(canonical_layer_type(alias) != alias);
  CHECK(canonical_layer_type("AvgPool2D") == "AveragePooling2D");
  CHECK(canonical_layer_type("GlobalAvgPool2D") == "GlobalAveragePooling2D");
  CHECK(canonical_layer_type("Conv2D") == "Conv2D");
  for (const std::string& t : layer_types()) CHECK(canonical_layer_type(t) == t);
}

TEST_CASE("config: a good config gives its values and Keras's default names", "[config]") {
  Config c = parse_config(kGood, "cfg.yaml");
  CHECK(c.path == "cfg.yaml");
  CHECK(c.text == kGood);
  CHECK(c.model.name == "tiny");
  REQUIRE(c.model.layers.size() == 6);
  std::vector<std::string> names, types;
  for (const auto& l : c.model.layers) names.push_back(l.name), types.push_back(l.type);
  CHECK(names == std::vector<std::string>{"input_1", "c1", "max_pooling2d_1", "conv2d_transpose_1",
                                          "concatenate_1", "conv2d_1"});
  CHECK(types == std::vector<std::string>{"Input", "Conv2D", "MaxPooling2D", "Conv2DTranspose",
                                          "Concatenate", "Conv2D"});
  CHECK(c.model.layers[4].inputs == std::vector<std::string>{"conv2d_transpose_1", "c1"});
  CHECK(c.model.layers[2].inputs.empty());
  // The layer's own keys stay in its node, for its factory; the mark points at the entry.
  CHECK(c.model.layers[1].node["filters"].as<int>() == 4);
  CHECK(c.model.layers[1].mark.line + 1 == 6);

  CHECK(c.data.images == "imgs");
  CHECK(c.data.masks == "msks");
  CHECK(c.data.mask_suffix == "_mask");
  CHECK(c.data.validation_split == Approx(0.1));
  CHECK(c.data.shuffle);
  CHECK_FALSE(c.data.skip_bad_files);
  CHECK(c.data.loader_threads == 0);

  const auto& t = c.training;
  CHECK(t.epochs == 3);
  CHECK(t.batch_size == 4);
  CHECK(t.seed == 7);
  CHECK(t.loss.kind == LossKind::BinaryCrossentropy);
  CHECK(t.metrics == std::vector<std::string>{"mean_iou"});
  CHECK(t.optimizer.type == OptimizerKind::SGD);
  CHECK(t.optimizer.learning_rate == Approx(0.05));
  CHECK(t.optimizer.momentum == Approx(0.9));
  CHECK_FALSE(t.optimizer.nesterov);
  CHECK(t.early_stopping.enabled);
  CHECK(t.early_stopping.monitor == "val_mean_iou");
  CHECK(t.early_stopping.mode == MonitorMode::Max);
  CHECK(t.early_stopping.patience == 2);
  CHECK_FALSE(t.early_stopping.restore_best_weights);
  CHECK(t.model_checkpoint.enabled);
  CHECK(t.model_checkpoint.filepath == "best.h5");
  CHECK(t.model_checkpoint.monitor == "val_loss");
  CHECK(t.model_checkpoint.save_best_only);
  CHECK(t.output_dir == "out");
}

TEST_CASE("config: defaults of a minimal config", "[config]") {
  Config c = parse_config(
      "model: {layers: [{type: Input, shape: [4, 4, 1]}, {type: Conv2D, filters: 1, kernel_size: 1},"
      " {type: Conv2D, filters: 1, kernel_size: 1}, {type: Add, inputs: [conv2d_1, conv2d_2]}]}\n"
      "data: {images: a, masks: b}\n"
      "training: {callbacks: [{type: ModelCheckpoint, filepath: 'ep{epoch:03d}.h5'}]}\n",
      "min.yaml");
  CHECK(c.model.name == "model");
  CHECK(c.model.layers[3].name == "add_1");
  CHECK(c.data.validation_split == 0.0);
  const auto& t = c.training;
  CHECK(t.epochs == 1);
  CHECK(t.batch_size == 32);
  CHECK(t.seed == 0);
  CHECK(t.loss.kind == LossKind::BinaryCrossentropy);
  CHECK(t.metrics.empty());
  CHECK(t.optimizer.type == OptimizerKind::RMSprop);  // Keras's Model.compile(optimizer="rmsprop")
  CHECK(t.optimizer.learning_rate == Approx(0.001));
  CHECK(t.optimizer.rho == Approx(0.9));
  CHECK(t.optimizer.momentum == 0.0);
  CHECK(t.optimizer.epsilon == Approx(1e-7));
  CHECK_FALSE(t.optimizer.centered);
  CHECK_FALSE(t.early_stopping.enabled);
  // A checkpoint of every epoch needs no validation data (its monitor is unused).
  CHECK(t.model_checkpoint.enabled);
  CHECK(t.model_checkpoint.filepath == "ep{epoch:03d}.h5");
  CHECK_FALSE(t.model_checkpoint.save_best_only);
  CHECK(t.output_dir == "runs/model");
  CHECK(t.precision == Precision::TF32);  // as TensorFlow and PyTorch on GPUs
  CHECK_FALSE(t.cuda_graphs);             // opt-in, as PyTorch's
}

TEST_CASE("config: EarlyStopping takes Keras 3's baseline and start_from_epoch", "[config]") {
  const std::string base =
      "model: {layers: [{type: Input, shape: [4, 4, 1]}, {type: Conv2D, filters: 1, kernel_size: 1}]}\n"
      "data: {images: a, masks: b, validation_split: 0.2}\n"
      "training: {metrics: [dice], callbacks: [";
  const auto parse = [&](const std::string& cb) { return parse_config(base + cb + "]}\n", "e.yaml").training; };
  const EarlyStoppingConfig d = parse("{type: EarlyStopping}").early_stopping;
  CHECK_FALSE(d.baseline.has_value());
  CHECK(d.start_from_epoch == 0);
  CHECK_FALSE(parse("{type: EarlyStopping, baseline: null}").early_stopping.baseline.has_value());  // Keras's None
  const EarlyStoppingConfig g = parse("{type: EarlyStopping, baseline: 0.25, start_from_epoch: 5}").early_stopping;
  REQUIRE(g.baseline.has_value());
  CHECK(*g.baseline == 0.25);
  CHECK(g.start_from_epoch == 5);
  CHECK_THROWS_WITH(parse("{type: EarlyStopping, start_from_epoch: -1}"),
                    Catch::Contains("training.callbacks[0] (EarlyStopping): 'start_from_epoch' must be in [0, "));
  CHECK_THROWS_WITH(parse("{type: EarlyStopping, baseline: low}"), Catch::Contains("'baseline' must be a number, got 'low'"));
  CHECK_THROWS_WITH(parse("{type: EarlyStopping, baselin: 0.2}"),
                    Catch::Contains("unknown key 'baselin' (did you mean 'baseline'?)"));
}

TEST_CASE("config: ReduceLROnPlateau takes Keras's arguments and defaults", "[config]") {
  const std::string base =
      "model: {layers: [{type: Input, shape: [4, 4, 1]}, {type: Conv2D, filters: 1, kernel_size: 1}]}\n"
      "data: {images: a, masks: b, validation_split: 0.2}\n"
      "training: {metrics: [dice], callbacks: [";
  const auto parse = [&](const std::string& cb) { return parse_config(base + cb + "]}\n", "r.yaml").training; };
  const ReduceLROnPlateauConfig d = parse("{type: ReduceLROnPlateau}").reduce_lr;
  CHECK(d.enabled);
  CHECK(d.monitor == "val_loss");
  CHECK(d.factor == 0.1);
  CHECK(d.patience == 10);
  CHECK(d.mode == MonitorMode::Auto);
  CHECK(d.min_delta == 1e-4);
  CHECK(d.cooldown == 0);
  CHECK(d.min_lr == 0.0);
  CHECK_FALSE(parse("{type: EarlyStopping}").reduce_lr.enabled);
  // verbose (Keras's printing switch) is accepted on every callback.
  const ReduceLROnPlateauConfig g = parse("{type: ReduceLROnPlateau, monitor: val_dice, factor: 0.5, patience: 3, "
                                          "mode: max, min_delta: 0.01, cooldown: 2, min_lr: 1.0e-6, verbose: 1}, "
                                          "{type: EarlyStopping, verbose: 1}")
                                        .reduce_lr;
  CHECK(g.monitor == "val_dice");
  CHECK(g.factor == 0.5);
  CHECK(g.patience == 3);
  CHECK(g.mode == MonitorMode::Max);
  CHECK(g.min_delta == 0.01);
  CHECK(g.cooldown == 2);
  CHECK(g.min_lr == 1e-6);
  CHECK_THROWS_WITH(parse("{type: ReduceLROnPlateau, factor: 1}"),
                    Catch::Contains("r.yaml:3:75: training.callbacks[0] (ReduceLROnPlateau): 'factor' must be "
                                    "between 0 and 1 (new learning rate = learning rate * factor), got 1"));
  CHECK_THROWS_WITH(parse("{type: ReduceLROnPlateau, monitor: val_dce}"), Catch::Contains("did you mean 'val_dice'"));
  CHECK_THROWS_WITH(parse("{type: ReduceLROnPlateau}, {type: ReduceLROnPlateau}"),
                    Catch::Contains("give at most one ReduceLROnPlateau"));
  CHECK_THROWS_WITH(parse("{type: ReduceLROnPlateau, cooldown: -1}"), Catch::Contains("'cooldown' must be in [0, "));
  CHECK_THROWS_WITH(parse("{type: ReduceLROnPlateau, epsilon: 0.01}"),  // Keras 2's name
                    Catch::Contains("unknown key 'epsilon' (did you mean 'min_delta'?)"));
}

TEST_CASE("config: a missing key is not said to be misspelt as a known one", "[config]") {
  // With validation_images given, a missing images read "did you mean 'images'?" of it.
  std::string text = kGood;
  text.replace(text.find("  images: imgs\n"), 15, "  validation_images: vi\n  validation_masks: vm\n");
  text.replace(text.find("  validation_split: 0.1\n"), 24, "");
  CHECK_THROWS_WITH(parse_config(text, "v.yaml"), Catch::Contains("data: 'images' is required; add 'images: <value>'") &&
                                                      !Catch::Contains("did you mean"));
}

TEST_CASE("config: TensorBoard takes Keras 3's arguments and defaults", "[config]") {
  const std::string base =
      "model: {layers: [{type: Input, shape: [4, 4, 1]}, {type: Conv2D, filters: 1, kernel_size: 1}]}\n"
      "data: {images: a, masks: b}\n"
      "training: {callbacks: [";
  const auto parse = [&](const std::string& cb) { return parse_config(base + cb + "]}\n", "t.yaml").training; };
  CHECK_FALSE(parse("{type: EarlyStopping, monitor: loss}").tensorboard.enabled);
  const TensorBoardConfig d = parse("{type: TensorBoard}").tensorboard;
  CHECK(d.enabled);
  CHECK(d.log_dir == "logs");
  CHECK(d.update_freq == 0);
  CHECK(d.histogram_freq == 0);
  CHECK_FALSE(d.write_steps_per_second);
  CHECK_THAT(d.where, Catch::StartsWith("t.yaml:3:24: training.callbacks[0] (TensorBoard)"));
  // Keras's defaults written out, and its arguments that change nothing here, are accepted.
  const TensorBoardConfig k = parse("{type: TensorBoard, log_dir: tb/run1, histogram_freq: 2, write_graph: false, "
                                    "write_images: false, write_steps_per_second: true, update_freq: epoch, "
                                    "profile_batch: 0, embeddings_freq: 0, embeddings_metadata: null}")
                                  .tensorboard;
  CHECK(k.log_dir == "tb/run1");
  CHECK_FALSE(k.write_graph);
  CHECK(d.write_graph);  // Keras's default
  CHECK(k.histogram_freq == 2);
  CHECK(k.write_steps_per_second);
  CHECK(k.update_freq == 0);
  CHECK(parse("{type: TensorBoard, profile_batch: [0, 0]}").tensorboard.enabled);  // Keras's ways to say none
  CHECK(parse("{type: TensorBoard, profile_batch: '0,0'}").tensorboard.enabled);
  CHECK(parse("{type: TensorBoard, profile_batch: '0, 0'}").tensorboard.enabled);
  CHECK_THROWS_WITH(parse("{type: TensorBoard, profile_batch: '5,8'}"),
                    Catch::Contains("'profile_batch' is 5,8; profiling through TensorBoard is not supported"));
  CHECK(parse("{type: TensorBoard, update_freq: batch}").tensorboard.update_freq == 1);
  CHECK(parse("{type: TensorBoard, update_freq: 100}").tensorboard.update_freq == 100);
  CHECK_THROWS_WITH(parse("{type: TensorBoard, log_dir: /tmp/logs}"),
                    Catch::Contains("'log_dir' '/tmp/logs' leaves the output folder"));
  CHECK_THROWS_WITH(parse("{type: TensorBoard, log_dir: ''}"), Catch::Contains("'log_dir' must not be empty"));
  CHECK_THROWS_WITH(parse("{type: TensorBoard, histogram_freq: -1}"), Catch::Contains("'histogram_freq' must be in [0, "));
  CHECK_THROWS_WITH(parse("{type: TensorBoard, logdir: logs}"),  // TensorFlow 1's name
                    Catch::Contains("unknown key 'logdir' (did you mean 'log_dir'?)"));
}

TEST_CASE("config: training.precision picks the GPU convolution arithmetic", "[config]") {
  const std::string base =
      "model: {layers: [{type: Input, shape: [4, 4, 1]}, {type: Conv2D, filters: 1, kernel_size: 1}]}\n"
      "data: {images: a, masks: b}\n";
  CHECK(parse_config(base + "training: {precision: tf32}\n", "p.yaml").training.precision == Precision::TF32);
  CHECK(parse_config(base + "training: {precision: bf16}\n", "p.yaml").training.precision == Precision::BF16);
  CHECK(parse_config(base + "training: {precision: fp32}\n", "p.yaml").training.precision == Precision::FP32);
  CHECK_THROWS_WITH(parse_config(base + "training: {precision: fp16}\n", "p.yaml"),
                    Catch::Contains("p.yaml:3:23: training: 'precision' is 'fp16'") && Catch::Contains("use one of: fp32, tf32, bf16"));
}

TEST_CASE("config: training.cuda_graphs turns recorded steps on, and anything but a boolean is named", "[config]") {
  const std::string base =
      "model: {layers: [{type: Input, shape: [4, 4, 1]}, {type: Conv2D, filters: 1, kernel_size: 1}]}\n"
      "data: {images: a, masks: b}\n";
  CHECK(parse_config(base + "training: {cuda_graphs: true}\n", "g.yaml").training.cuda_graphs);
  CHECK_FALSE(parse_config(base + "training: {cuda_graphs: false}\n", "g.yaml").training.cuda_graphs);
  CHECK_THROWS_WITH(parse_config(base + "training: {cuda_graphs: sometimes}\n", "g.yaml"),
                    Catch::Contains("g.yaml:3:25: training: 'cuda_graphs' must be true or false, got 'sometimes'"));
}

TEST_CASE("config: optimizers by name or mapping take Keras's defaults per type", "[config]") {
  auto opt = [](const std::string& o) {
    return parse_config("model: {layers: [{type: Input, shape: [4, 4, 1]}]}\n"
                        "data: {images: a, masks: b}\n"
                        "training: {optimizer: " + o + ", seed: 18446744073709551615}\n",
                        "o.yaml")
        .training;
  };
  CHECK(opt("sgd").optimizer.type == OptimizerKind::SGD);
  CHECK(opt("sgd").seed == 18446744073709551615ull);
  CHECK(opt("adam").optimizer.type == OptimizerKind::Adam);
  CHECK(opt("adam").optimizer.learning_rate == Approx(0.001));
  CHECK(opt("RMSProp").optimizer.type == OptimizerKind::RMSprop);
  CHECK(opt("RMSProp").optimizer.learning_rate == Approx(0.001));

  OptimizerConfig sgd = opt("{type: SGD, learning_rate: 0.03, momentum: 0.9, nesterov: true, "
                            "decay: 1e-6}").optimizer;
  CHECK(sgd.learning_rate == Approx(0.03));
  CHECK(sgd.momentum == Approx(0.9));
  CHECK(sgd.nesterov);
  CHECK(sgd.decay == Approx(1e-6));
  OptimizerConfig adam = opt("{type: Adam, beta_1: 0.8, epsilon: 1e-8}").optimizer;
  CHECK(adam.learning_rate == Approx(0.001));
  CHECK(adam.beta_1 == Approx(0.8));
  CHECK(adam.beta_2 == Approx(0.999));
  CHECK(adam.epsilon == Approx(1e-8));
  CHECK(adam.weight_decay == 0.0);
  CHECK_FALSE(adam.amsgrad);
  CHECK(opt("{type: Adam, amsgrad: true}").optimizer.amsgrad);
  CHECK(opt("{type: AdamW, amsgrad: true}").optimizer.amsgrad);
  CHECK_FALSE(opt("RMSprop").optimizer.centered);
  CHECK(opt("{type: RMSprop, centered: true, momentum: 0.9}").optimizer.centered);
  CHECK_FALSE(opt("{type: SGD, amsgrad: false, centered: false}").optimizer.amsgrad);  // Keras's defaults pass
  CHECK(opt("{type: Adam, weight_decay: null}").optimizer.weight_decay == 0.0);  // Keras's None
  CHECK(opt("{type: SGD, weight_decay: 0.01}").optimizer.weight_decay == Approx(0.01));
  CHECK(opt("adamw").optimizer.type == OptimizerKind::AdamW);
  CHECK(opt("adamw").optimizer.weight_decay == Approx(0.004));  // Keras's AdamW defaults
  CHECK(opt("adamw").optimizer.learning_rate == Approx(0.001));
  OptimizerConfig adamw = opt("{type: AdamW, weight_decay: 0.05, beta_2: 0.99}").optimizer;
  CHECK(adamw.weight_decay == Approx(0.05));
  CHECK(adamw.beta_2 == Approx(0.99));
  CHECK(opt("{type: AdamW}").optimizer.weight_decay == Approx(0.004));
  CHECK_THROWS_WITH(opt("{type: SGD, learning_rate: 0.5, weight_decay: 2}"),
                    Catch::Matchers::Contains("weight_decay") && Catch::Matchers::Contains("below 1"));
  CHECK_THROWS_WITH(opt("{type: AdamW, weight_decay: null}"),
                    Catch::Matchers::Contains("AdamW needs a number") && Catch::Matchers::Contains("use Adam"));
  OptimizerConfig cos = opt("{type: Adam, learning_rate: {type: CosineDecay, initial_learning_rate: 0.002, "
                            "decay_steps: 500, warmup_target: null}}").optimizer;
  CHECK(cos.schedule.type == ScheduleKind::CosineDecay);
  CHECK(cos.schedule.decay_steps == 500);
  CHECK_FALSE(cos.schedule.warmup);  // Keras's None: no warmup
  CHECK(cos.learning_rate == Approx(0.002));  // the rate at step 0
  OptimizerConfig pw = opt("{type: SGD, learning_rate: {type: PiecewiseConstantDecay, boundaries: [100, 200], "
                           "values: [0.1, 0.01, 0.001]}}").optimizer;
  CHECK(pw.schedule.values.size() == 3);
  CHECK(pw.learning_rate == Approx(0.1));
  auto schedule_error = [&](const std::string& lr, const std::string& extra = "") -> std::string {
    try {
      parse_config("model: {layers: [{type: Input, shape: [4, 4, 1]}]}\n"
                   "data: {images: a, masks: b, validation_split: 0.1}\n"
                   "training: {optimizer: {type: SGD, learning_rate: " + lr + extra + "}" +
                       (extra.empty() ? "" : ", callbacks: [{type: ReduceLROnPlateau}]") + "}\n",
                   "o.yaml");
    } catch (const UserError& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK_THAT(schedule_error("{class_name: CosineDecay, config: {initial_learning_rate: 0.1, decay_steps: 10}}"),
             Catch::Matchers::Contains("serialized form") && Catch::Matchers::Contains("{type: CosineDecay"));
  CHECK_THAT(schedule_error("{type: CosineDecay, initial_learning_rate: 0.1, decay_steps: 0}"),
             Catch::Matchers::Contains("o.yaml:3:") && Catch::Matchers::Contains("'decay_steps' must be greater than 0"));
  CHECK_THAT(schedule_error("{type: CosineDecayRestart, initial_learning_rate: 0.1, first_decay_steps: 10}"),
             Catch::Matchers::Contains("did you mean 'CosineDecayRestarts'") &&
                 Catch::Matchers::Contains("use one of: ExponentialDecay"));
  OptimizerConfig sgdr = opt("{type: SGD, learning_rate: {type: CosineDecayRestarts, initial_learning_rate: 0.1, "
                             "first_decay_steps: 100, m_mul: 0.9}}").optimizer;
  CHECK(sgdr.schedule.type == ScheduleKind::CosineDecayRestarts);
  CHECK(sgdr.schedule.decay_steps == 100);
  CHECK(sgdr.schedule.t_mul == 2);  // Keras's defaults
  CHECK(sgdr.schedule.m_mul == Approx(0.9));
  CHECK(sgdr.schedule.alpha == 0);
  CHECK(schedule_text(sgdr.schedule) ==
        "CosineDecayRestarts(initial_learning_rate=0.1, first_decay_steps=100, t_mul=2, m_mul=0.9, alpha=0)");
  CHECK_THAT(schedule_error("{type: CosineDecayRestarts, initial_learning_rate: 0.1, decay_steps: 10}"),
             Catch::Matchers::Contains("'decay_steps' is CosineDecay's") &&
                 Catch::Matchers::Contains("first_decay_steps"));
  CHECK_THAT(schedule_error("'CosineDecayRestarts(1e-3, first_decay_steps=20)'"),
             Catch::Matchers::Contains("is not a number") &&
                 Catch::Matchers::Contains("{type: CosineDecayRestarts, initial_learning_rate: 0.001, "
                                           "first_decay_steps: 1000}"));
  CHECK_THAT(schedule_error("ExponentialDecay"), Catch::Matchers::Contains("{type: ExponentialDecay, "));
  OptimizerConfig sgdr3 = opt("{type: SGD, learning_rate: {type: CosineDecayRestarts, initial_learning_rate: 0.1, "
                              "first_decay_steps: 20.5, t_mul: 3, alpha: 0.1}}").optimizer;
  CHECK(sgdr3.schedule.t_mul == 3);
  CHECK(sgdr3.schedule.decay_steps == 20.5);
  CHECK(sgdr3.schedule.alpha == Approx(0.1));
  CHECK_THAT(schedule_error("{type: CosineDecayRestarts, initial_learning_rate: 0.1, first_decay_steps: 10, "
                            "t_mul: 0.5}"),
             Catch::Matchers::Contains("'t_mul' must be at least 1"));
  CHECK_THAT(schedule_error("{type: CosineDecayRestarts, initial_learning_rate: 0.1, first_decay_steps: 10, "
                            "m_mul: 1.5}",
                            ", weight_decay: 0.01"),
             Catch::Matchers::Contains("CosineDecayRestarts whose m_mul > 1") &&
                 Catch::Matchers::Contains("grows without bound") && Catch::Matchers::Contains("remove weight_decay"));
  CHECK_THAT(schedule_error("{type: CosineDecay, initial_learning_rate: 0.1, decay_steps: 10, warmup_steps: 5}"),
             Catch::Matchers::Contains("'warmup_steps' needs warmup_target"));
  CHECK_THAT(schedule_error("{type: ExponentialDecay, initial_learning_rate: 0.1, decay_steps: 10, decay_rate: 1.1}",
                            ", weight_decay: 0.01"),
             Catch::Matchers::Contains("grows without bound"));
  CHECK_THAT(schedule_error("{type: PiecewiseConstantDecay, boundaries: [10], values: [0.1]}"),
             Catch::Matchers::Contains("one more entry than 'boundaries'"));
  CHECK_THAT(schedule_error("{type: PiecewiseConstantDecay, boundaries: [10, 5], values: [0.1, 0.2, 0.3]}"),
             Catch::Matchers::Contains("strictly increasing"));
  CHECK_THAT(schedule_error("{type: ExponentialDecay, initial_learning_rate: 0.1, decay_steps: 10, decay_rate: 0.9}",
                            ", decay: 0.001"),
             Catch::Matchers::Contains("remove 'decay'"));
  CHECK_THAT(schedule_error("{type: ExponentialDecay, initial_learning_rate: 0.1, decay_steps: 10, decay_rate: 0.9}",
                            " "),
             Catch::Matchers::Contains("ReduceLROnPlateau, which sets the learning rate") &&
                 Catch::Matchers::Contains("use one or the other"));
  OptimizerConfig rms = opt("{type: RMSprop, rho: 0.95, momentum: 0.5}").optimizer;
  CHECK(rms.learning_rate == Approx(0.001));
  CHECK(rms.rho == Approx(0.95));
  CHECK(rms.momentum == Approx(0.5));
  CHECK(rms.epsilon == Approx(1e-7));
  CHECK_THROWS_WITH(opt("{type: RMSprop, nesterov: true}"),
                    Catch::Matchers::Contains("o.yaml:3:39: training.optimizer (RMSprop): unknown "
                                              "key 'nesterov'; known keys: centered, clipnorm, clipvalue, decay, "
                                              "epsilon, global_clipnorm, learning_rate, momentum, rho, type"));
}

TEST_CASE("config: Keras snake_case of layer types", "[config]") {
  CHECK(keras_snake_case("Conv2D") == "conv2d");
  CHECK(keras_snake_case("Conv2DTranspose") == "conv2d_transpose");
  CHECK(keras_snake_case("MaxPooling2D") == "max_pooling2d");
  CHECK(keras_snake_case("UpSampling2D") == "up_sampling2d");
  CHECK(keras_snake_case("BatchNormalization") == "batch_normalization");
  CHECK(keras_snake_case("Input") == "input");
}

TEST_CASE("config: load_config reads a file and names a missing one", "[config]") {
  namespace fs = std::filesystem;
  fs::path p = fs::temp_directory_path() / ("trainer_test_config_" + std::to_string(::getpid()) + ".yaml");
  { std::ofstream(p) << kGood; }
  Config c = load_config(p.string());
  fs::remove(p);
  CHECK(c.text == kGood);
  CHECK(c.path == p.string());
  CHECK(c.model.layers.size() == 6);
  CHECK_THROWS_WITH(load_config(p.string()),
                    Catch::Matchers::Contains(p.string() + ": cannot open the config file"));
  // A folder read as a file gave "the config is empty".
  const fs::path dir = fs::temp_directory_path();
  CHECK_THROWS_WITH(load_config(dir.string()),
                    Catch::Matchers::Contains(dir.string() + ": is a folder, not a config file"));
  // From fuzzing: an endless file was read until memory ran out. A device is refused unopened, a large
  // file after 16 MiB.
  CHECK_THROWS_WITH(load_config("/dev/zero"),
                    Catch::Matchers::Contains("--config '/dev/zero' is a character device, not a file"));
  { std::ofstream(p) << kGood; }
  fs::resize_file(p, std::uintmax_t(17) << 20);  // sparse: no disk used
  CHECK_THROWS_WITH(load_config(p.string()),
                    Catch::Matchers::Contains(p.string() + ": the config file is larger than 16 MiB"));
  fs::remove(p);
}

TEST_CASE("config: YAML aliases that expand without end are rejected", "[config]") {
  // From fuzzing: 1.3 KB of ten levels of nine-fold aliases (9^10 values) hung the duplicate-key check.
  std::string bomb = "x0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9]\n";
  for (int i = 1; i < 10; ++i) {
    bomb += "x" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 9; ++k) bomb += (k ? ", *a" : "*a") + std::to_string(i - 1);
    bomb += "]\n";
  }
  CHECK_THROWS_WITH(parse_config(bomb + kGood, "bomb.yaml"),
                    Catch::Matchers::Contains("bomb.yaml: the config holds more than 1000000 YAML values once its "
                                              "aliases (*name) are expanded"));
  // An alias inside its own anchor made a cycle, walked until the stack overflowed (SIGSEGV).
  CHECK_THROWS_WITH(parse_config("a: &x [*x]\n" + kGood, "cycle.yaml"),
                    Catch::Matchers::Contains("cycle.yaml:1:4: values nested more than 100 levels deep") &&
                        Catch::Matchers::Contains("'a: &x [*x]', nests without end: give the value itself"));
  CHECK_THROWS_WITH(parse_config("a: &x {b: *x}\n" + kGood, "cycle.yaml"), Catch::Matchers::Contains("nests without end"));
  // A trailing '---' with nothing (or a comment) after it is not a second document.
  CHECK(parse_config(kGood + "---\n# end\n", "dash.yaml").model.layers.size() == 6);
  // An alias used a few times is fine.
  std::string reuse = kGood;
  reuse.replace(reuse.find("shape: [8, 8, 3]"), 16, "shape: &s [8, 8, 3]");
  CHECK(parse_config(reuse, "reuse.yaml").model.layers.size() == 6);
}

TEST_CASE("config: the product configs parse", "[config]") {
  Config big = load_config(TRAINER_SOURCE_DIR "/configs/unet.yaml");
  CHECK(big.model.layers.front().type == "Input");
  CHECK(big.model.layers.back().node["activation"].as<std::string>() == "sigmoid");
  CHECK(big.training.optimizer.type == OptimizerKind::SGD);
  CHECK(big.training.optimizer.learning_rate == Approx(0.03));
  CHECK(big.training.optimizer.nesterov);
  CHECK(big.training.batch_size == 32);
  CHECK(big.training.early_stopping.patience == 20);
  CHECK(big.training.model_checkpoint.save_best_only);

  Config small = load_config(TRAINER_SOURCE_DIR "/configs/unet_small.yaml");
  CHECK(small.model.layers.front().node["shape"][0].as<int>() == 128);
  CHECK(small.training.optimizer.type == OptimizerKind::Adam);
  CHECK(small.training.early_stopping.monitor == "val_mean_iou");
  CHECK(small.training.early_stopping.restore_best_weights);
  CHECK(small.training.metrics == std::vector<std::string>{"mean_iou", "dice", "accuracy"});
  // Same topology: Input, Rescaling, 4 levels of 2 Conv2D + pool, 2 Conv2D, 4 levels of
  // Conv2DTranspose + Concatenate + 2 Conv2D, the 1x1 head: 33 layers.
  CHECK(big.model.layers.size() == 33);
  CHECK(small.model.layers.size() == 33);
}

TEST_CASE("config: a checkpoint given as the config is named as one", "[config]") {
  // --config final.h5 said "YAML syntax error: unknown escape character: \x00".
  const std::string hdf5 = std::string("\x89HDF\r\n\x1a\n", 8) + std::string(32, '\0');
  CHECK_THROWS_WITH(parse_config(hdf5, "runs/a/final.h5"),
                    Catch::Contains("runs/a/final.h5 is an HDF5 file (a checkpoint?), not a YAML config") &&
                        Catch::Contains("--resume"));
}

TEST_CASE("config: null (Python's None) where Keras's default is None means that default", "[config]") {
  // Activation=None, MaxPooling2D's strides=None, Dropout's seed=None and metrics or
  // callbacks of None were refused as "has no value".
  const Config c = parse_config(
      "model: {layers: [{type: Input, shape: [8, 8, 1]},\n"
      "  {type: Conv2D, filters: 2, kernel_size: 3, padding: same, activation: null},\n"
      "  {type: MaxPooling2D, pool_size: 2, strides: null},\n"
      "  {type: Dropout, rate: 0.1, seed: null},\n"
      "  {type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}]}\n"
      "data: {images: a, masks: b}\n"
      "training: {metrics: null, callbacks: null}\n",
      "none.yaml");
  CHECK(c.training.metrics.empty());
  CHECK_FALSE(c.training.early_stopping.enabled);
  const Model m(c.model, c.path);
  CHECK(m.layer_output_shape(2).h == 4);  // strides = pool_size
  // A Python None left as it is gets the fix.
  CHECK_THROWS_WITH(Model(parse_config(
                              "model: {layers: [{type: Input, shape: [8, 8, 1]},\n"
                              "  {type: Conv2D, filters: 1, kernel_size: 1, activation: None}]}\n"
                              "data: {images: a, masks: b}\ntraining: {}\n",
                              "py.yaml")
                              .model,
                          "py.yaml"),
                    Catch::Contains("'activation' is Python's None, which YAML writes as null"));
}

TEST_CASE("data.crop: crops at native resolution, its defaults and its errors", "[config][crops]") {
  CHECK_FALSE(parse_config(kGood, "cfg.yaml").data.crop);
  const Config d = parse_config(edit("  validation_split: 0.1\n", "  validation_split: 0.1\n  crop: {}\n"), "cfg.yaml");
  REQUIRE(d.data.crop);
  CHECK(d.data.crop->scale == 1.0);
  CHECK(d.data.crop->foreground == Approx(1.0 / 3));
  CHECK(d.data.crop->per_image == 1);
  CHECK(d.data.crop->tile_overlap == 0.5);
  CHECK(d.data.crop->tile_blend == "gaussian");
  CHECK(d.data.crop->where == "cfg.yaml:26:9: data.crop");
  const Config c = parse_config(edit("  validation_split: 0.1\n", "  validation_split: 0.1\n  crop: {scale: 0.5, foreground: 1, per_image: 3, "
                                     "tile_overlap: 0.25, tile_blend: linear}\n"), "cfg.yaml");
  CHECK(c.data.crop->scale == 0.5);
  CHECK(c.data.crop->foreground == 1.0);
  CHECK(c.data.crop->per_image == 3);
  CHECK(c.data.crop->tile_overlap == 0.25);
  CHECK(c.data.crop->tile_blend == "linear");
  const auto crop_error = [](const std::string& crop) {
    return error_of(edit("  validation_split: 0.1\n", "  validation_split: 0.1\n  crop: " + crop + "\n"));
  };
  CHECK_THAT(crop_error("3"), Catch::Contains("data.crop must be a map of its settings"));
  CHECK_THAT(crop_error("{scale: 0}"), Catch::Contains("scale"));
  CHECK_THAT(crop_error("{foreground: 1.5}"), Catch::Contains("foreground"));
  CHECK_THAT(crop_error("{per_image: 0}"), Catch::Contains("per_image"));
  CHECK_THAT(crop_error("{tile_overlap: 1}"), Catch::Contains("must be below 1"));
  CHECK_THAT(crop_error("{tile_blend: cosine}"), Catch::Contains("tile_blend"));
  CHECK_THAT(crop_error("{foregroud: 0.5}"), Catch::Contains("foreground"));  // a suggestion
}

TEST_CASE("config: Keras's metric names are taken and logged as Keras logs them", "[config]") {
  const Config c = parse_config(
      "model: {layers: [{type: Input, shape: [4, 4, 1]}, {type: Conv2D, filters: 1, kernel_size: 1}]}\n"
      "data: {images: a, masks: b, validation_split: 0.5}\n"
      "training: {metrics: [binary_accuracy, Precision, Recall, BinaryIoU],\n"
      "           callbacks: [{type: EarlyStopping, monitor: val_binary_io_u, mode: max}]}\n",
      "keras_metrics.yaml");
  CHECK(c.training.metrics == std::vector<std::string>{"binary_accuracy", "precision", "recall", "binary_io_u"});
}
