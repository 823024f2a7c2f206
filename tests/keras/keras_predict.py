"""Keras's side of tests/test_keras_roundtrip.cpp for files trainer exports.

    python keras_predict.py MODEL.keras IMAGE.png OUT.bin [RESAVED]

Opens MODEL.keras with keras.models.load_model, writes its probabilities for
IMAGE.png (pixel values 0..255, RGB) to OUT.bin (float32, H x W of the first
channel, row-major) and, with RESAVED, saves the model again as Keras writes
it: RESAVED.keras and RESAVED.h5.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402


def main(model_path, image_path, out, resaved=None):
    model = keras.models.load_model(model_path)
    image = tf.cast(tf.io.decode_png(tf.io.read_file(image_path), channels=3), tf.float32)[None]
    model.predict(image, verbose=0)[0, :, :, 0].astype("<f4").tofile(out)
    if resaved:
        model.save(resaved + ".keras")
        model.save(resaved + ".h5")


if __name__ == "__main__":
    main(*sys.argv[1:])
