"""Writes scikit-learn's 8x8 handwritten digits (1,797 images, the UCI optdigits test set) as
the .npy files examples/train_digits.lua reads:

    digits_images.npy  uint8 [1797, 8, 8], each pixel 0..16
    digits_labels.npy  uint8 [1797], the digit 0..9

Run from this folder with Debian's python3-sklearn: python3 make_digits.py
"""
import numpy as np
from sklearn.datasets import load_digits

digits = load_digits()
np.save("digits_images.npy", digits.images.astype(np.uint8))
np.save("digits_labels.npy", digits.target.astype(np.uint8))
print(digits.images.shape, np.bincount(digits.target))
