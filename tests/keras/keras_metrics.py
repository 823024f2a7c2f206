"""Keras's side of tests/test_keras_metrics.cpp: Keras's own metric values.

    python keras_metrics.py DIR BATCHES

Reads, from DIR, float32 little-endian arrays the test wrote:
  binary_logits.f32, binary_targets.f32   one value per pixel (targets 0 or 1)
  classes_logits.f32 [P, K], classes_labels.f32 [P]   K from classes.txt
and prints one JSON object: Keras's metrics on them, each updated once per
batch of the BATCHES equal parts (the values add across batches in Keras,
as in trainer across batches and towers).
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402


def evaluate(metrics, y_true, y_pred, batches):
    for part_true, part_pred in zip(np.array_split(y_true, batches), np.array_split(y_pred, batches)):
        for m in metrics.values():
            m.update_state(part_true, part_pred)
    return {name: float(m.result()) for name, m in metrics.items()}


def main(folder, batches):
    batches = int(batches)
    read = lambda name: np.fromfile(os.path.join(folder, name), dtype="<f4")  # noqa: E731
    z, y = read("binary_logits.f32"), read("binary_targets.f32")
    p = keras.ops.convert_to_numpy(keras.ops.sigmoid(z[:, None]))
    binary = evaluate({
        "binary_accuracy": keras.metrics.BinaryAccuracy(),
        "precision": keras.metrics.Precision(),
        "recall": keras.metrics.Recall(),
        "binary_io_u": keras.metrics.BinaryIoU(target_class_ids=[0, 1]),
        "auc": keras.metrics.AUC(),
    }, y[:, None], p, batches)
    k = int(open(os.path.join(folder, "classes.txt")).read())
    logits, labels = read("classes_logits.f32").reshape(-1, k), read("classes_labels.f32")
    softmax = keras.ops.convert_to_numpy(keras.ops.softmax(logits, axis=-1))
    classes = evaluate({
        "mean_io_u": keras.metrics.MeanIoU(num_classes=k, sparse_y_pred=False),
        "accuracy": keras.metrics.SparseCategoricalAccuracy(),
    }, labels, softmax, batches)
    print(json.dumps({"binary": binary, "classes": classes}))


if __name__ == "__main__":
    main(*sys.argv[1:])
