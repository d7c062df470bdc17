"""Parallel integer lists kept as one string in JSON: the lists as little-endian int64, zlib, base64.

A digest's per-step and per-collective tables are thousands of integers per report; as JSON numbers a warm
fleet of 1,024 reports took most of a second to parse and validate, as one string each tens of milliseconds.
A subclass names its lists in FIELDS (all of the same length) and, in DELTA, those stored as differences
(sorted times: small numbers, which zlib packs several times tighter; restored exactly).
"""
from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, model_serializer, model_validator


class Packed(BaseModel):
    FIELDS: ClassVar[tuple[str, ...]] = ()
    DELTA: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap", when_used="json")
    def _packed(self, handler) -> str:
        return self.pack()

    @model_validator(mode="wrap")
    @classmethod
    def _unpacked(cls, value, handler):
        return cls.unpack(value) if isinstance(value, str) else handler(value)

    def pack(self) -> str:
        import base64
        import zlib

        import numpy as np

        cols = [getattr(self, f) for f in self.FIELDS]
        n = len(cols[0])
        if any(len(c) != n for c in cols):
            raise ValueError(f"{type(self).__name__}: lists of different lengths")
        a = np.array(cols, "<i8").reshape(len(self.FIELDS), n)
        for i, f in enumerate(self.FIELDS):
            if f in self.DELTA and n:
                a[i, 1:] = np.diff(a[i])
        return base64.b64encode(zlib.compress(a.tobytes(), 6)).decode()

    @classmethod
    def unpack(cls, text: str):
        """The lists ``pack`` wrote, trusted as they are (the store's own entries; a damaged one raises
        ValueError, and the store then digests the report again)."""
        import base64
        import binascii
        import zlib

        import numpy as np

        name = cls.__name__
        try:
            a = np.frombuffer(zlib.decompress(base64.b64decode(text, validate=True)), "<i8")
        except (binascii.Error, zlib.error) as e:
            raise ValueError(f"{name}: not a packed table ({e})") from None
        if len(a) % len(cls.FIELDS):
            raise ValueError(f"{name}: packed table of the wrong size")
        a = a.reshape(len(cls.FIELDS), -1)
        if cls.DELTA:
            a = a.copy()
            for i, f in enumerate(cls.FIELDS):
                if f in cls.DELTA:
                    a[i] = np.cumsum(a[i])
        return cls.model_construct(**dict(zip(cls.FIELDS, a.tolist())))
