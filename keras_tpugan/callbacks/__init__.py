"""Callbacks that show a GAN learning."""
