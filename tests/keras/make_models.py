"""Keras models for tests/test_keras_roundtrip.cpp, saved as users save them.

    python make_models.py OUT_DIR SAMPLE_IMAGE

Writes to OUT_DIR: the seed notebook's U-Net (Lambda x / 255, he_normal ELU
convolutions, Dropout, BatchNormalization with moving statistics set away from
0 and 1, Conv2DTranspose, concatenate; widths 4, 8, 16; 64x64x3) as seed.keras,
seed.h5 and seed.json (Keras 3) and, where tf_keras (Keras 2) is installed, as
seed_tf2.h5; unsupported.keras, a model with layers trainer lacks; test.png
and test32.png, the top-left 64x64 and 32x32 of SAMPLE_IMAGE; keras_prob.bin,
the seed model's probabilities for test.png (float32, 64 x 64, row-major).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def mean_iou(y_true, y_pred):
    """The seed notebook's custom metric, saved by name in the compile config."""
    return tf.reduce_mean(tf.cast(tf.equal(y_true, tf.round(y_pred)), tf.float32))


def seed_unet(k, widths=(4, 8, 16)):
    L = k.layers
    inputs = L.Input((64, 64, 3))
    x = L.Lambda(lambda x: x / 255)(inputs)
    skips = []
    for i, w in enumerate(widths[:-1]):
        x = L.Conv2D(w, (3, 3), activation="elu", kernel_initializer="he_normal", padding="same")(x)
        x = L.Dropout(0.1)(x)
        x = L.Conv2D(w, (3, 3), activation="elu", kernel_initializer="he_normal", padding="same")(x)
        skips.append(x)
        x = L.MaxPooling2D((2, 2))(x)
    x = L.Conv2D(widths[-1], (3, 3), activation="elu", kernel_initializer="he_normal", padding="same")(x)
    x = L.BatchNormalization()(x)
    for w, skip in zip(reversed(widths[:-1]), reversed(skips)):
        x = L.Conv2DTranspose(w, (2, 2), strides=(2, 2), padding="same")(x)
        x = L.concatenate([x, skip])
        x = L.Conv2D(w, (3, 3), activation="elu", kernel_initializer="he_normal", padding="same")(x)
    outputs = L.Conv2D(1, (1, 1), activation="sigmoid")(x)
    model = k.Model(inputs=[inputs], outputs=[outputs])
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy", mean_iou])
    rng = np.random.default_rng(7)
    for layer in model.layers:  # weights away from their initial values, variances positive
        layer.set_weights([rng.uniform(0.5, 1.5, w.shape).astype("float32") if "variance" in v.name
                           else rng.normal(0, 0.3, w.shape).astype("float32")
                           for w, v in zip(layer.get_weights(), layer.weights)])
    return model


def main(out, sample):
    import keras
    image = tf.io.decode_png(tf.io.read_file(sample), channels=3)[:64, :64, :]
    tf.io.write_file(os.path.join(out, "test.png"), tf.io.encode_png(image))
    tf.io.write_file(os.path.join(out, "test32.png"), tf.io.encode_png(image[:32, :32, :]))
    model = seed_unet(keras)
    model.save(os.path.join(out, "seed.keras"))
    model.save(os.path.join(out, "seed.h5"))
    with open(os.path.join(out, "seed.json"), "w") as f:
        f.write(model.to_json())
    x = tf.cast(image, tf.float32)[None]
    model.predict(x, verbose=0)[0, :, :, 0].astype("<f4").tofile(os.path.join(out, "keras_prob.bin"))

    L = keras.layers
    i = L.Input((32, 32, 3))
    y = L.Lambda(lambda x: tf.image.resize(x, (16, 16)))(i)
    y = L.Conv2D(4, 3, padding="same", kernel_constraint=keras.constraints.MaxNorm(2))(y)
    y = L.LayerNormalization()(y)
    y = L.Conv3D(4, 3)(L.Reshape((16, 16, 4, 1))(y))
    keras.Model(i, y).save(os.path.join(out, "unsupported.keras"))

    try:
        import tf_keras
    except ImportError:
        print("tf_keras (Keras 2) is not installed: seed_tf2.h5 not written")
        return
    k2 = seed_unet(tf_keras)
    k2.set_weights(model.get_weights())
    k2.save(os.path.join(out, "seed_tf2.h5"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
