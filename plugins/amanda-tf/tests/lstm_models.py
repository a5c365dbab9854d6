"""Small Keras recurrent models for the LSTM tests (seeded, no downloads): vocabulary 50, embedding 8, 16 units,
sequences of 7 token ids; the batch stays unknown.  Factories take no arguments, so the command line can name
them (``amanda convert lstm_models:text_lstm ...``)."""

from __future__ import annotations

from typing import Any

VOCAB, EMBED, UNITS, STEPS = 50, 8, 16, 7


def _build(sequences: bool = False, state: bool = False, bias: bool = True, seed: int = 0, **lstm: Any) -> Any:
    import keras

    keras.utils.set_random_seed(seed)
    tokens = keras.Input((STEPS,), dtype="int32", name="tokens")
    h = keras.layers.Embedding(VOCAB, EMBED, name="embedding")(tokens)
    # a random bias (Keras' default is 0 but 1 for the forget gate), so a bias permuted wrongly shows
    layer = keras.layers.LSTM(UNITS, name="lstm", return_sequences=sequences, return_state=state, use_bias=bias,
                              bias_initializer="random_normal", **lstm)
    out = layer(h)
    if state:
        seq, h_last, c_last = out
        return keras.Model(tokens, [seq, h_last, c_last], name="text_lstm_states")
    if sequences:
        return keras.Model(tokens, out, name="text_lstm_sequences")
    probs = keras.layers.Dense(3, activation="softmax", name="probs")(out)
    return keras.Model(tokens, [out, probs], name="text_lstm")


def text_lstm() -> Any:
    """Embedding + LSTM (last state) + Dense softmax; outputs the LSTM state and the probabilities."""
    return _build()


def text_lstm_sequences() -> Any:
    """Embedding + LSTM returning the whole sequence ([batch, 7, 16])."""
    return _build(sequences=True)


def text_lstm_states() -> Any:
    """Embedding + LSTM returning the sequence and its final h and c."""
    return _build(state=True, sequences=True)


def text_lstm_no_bias() -> Any:
    return _build(bias=False)


def text_lstm_relu() -> Any:
    """An activation the ONNX LSTM's defaults do not have (relu): must stay unconverted."""
    return _build(activation="relu")


def text_lstm_backwards() -> Any:
    return _build(go_backwards=True)
