"""Kafka's four codecs for a records section (docs/format.md §4): what eoslog writes the reference
libraries and the peers' codecs read, what they write eoslog reads, and every section Kafka's
readers would refuse is a status, never an exception or a partial result."""

from __future__ import annotations

import gzip
import random
import zlib

import aiokafka.codec
import cramjam
import kafka.codec
import pytest
import zstandard

from eoslog.record import compression, layout, status

SEED = 20261124
CODECS = ["gzip", "snappy", "lz4", "zstd"]


def records_section(size: int, seed: int = SEED) -> bytes:
    """Bytes that compress some but not entirely (words from a small vocabulary)."""
    rng = random.Random(seed)
    words = [b"key", b"value", b"order", b"%d", b"-", b"\x00\x01", b"trace-id"]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words) + bytes([rng.randrange(256)])
    return bytes(out[:size])


def codec_id(name: str) -> int:
    return compression.CODEC_NAMES[name]


@pytest.mark.parametrize("size", [1, 100, 32 * 1024, 32 * 1024 + 1, 300_000])
@pytest.mark.parametrize("name", CODECS)
def test_every_codec_round_trips_every_size(name: str, size: int) -> None:
    data = records_section(size)
    section = compression.compress(codec_id(name), data)
    assert compression.decompress(codec_id(name), section, size) == data
    assert compression.decompress(codec_id(name), section, size - 1) == (
        status.DECOMPRESSED_TOO_LARGE
    )


@pytest.mark.parametrize("name", ["gzip", "snappy", "zstd"])
def test_peers_read_what_we_write_and_we_read_what_they_write(name: str) -> None:
    data = records_section(100_000)
    ours = compression.compress(codec_id(name), data)
    for peer in (kafka.codec, aiokafka.codec):
        assert getattr(peer, f"{name}_decode")(ours) == data
        theirs = getattr(peer, f"{name}_encode")(data)
        assert compression.decompress(codec_id(name), theirs, len(data)) == data


def test_gzip_is_an_rfc_1952_stream_at_kafkas_default_level() -> None:
    data = records_section(50_000)
    ours = compression.compress(layout.COMPRESSION_GZIP, data)
    assert ours[:3] == b"\x1f\x8b\x08"  # magic, deflate
    assert gzip.decompress(ours) == data
    # Level 6 (the JDK default) compresses exactly as zlib's level 6 does.
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert ours[10:-8] == deflate.compress(data) + deflate.flush()


def test_gzip_members_may_follow_one_another_as_java_reads_them() -> None:
    first, second = records_section(1000, 1), records_section(2000, 2)
    section = gzip.compress(first) + gzip.compress(second)
    assert compression.decompress(layout.COMPRESSION_GZIP, section, 3000) == first + second


def test_a_bare_zlib_stream_is_not_gzip() -> None:
    section = zlib.compress(records_section(1000))
    assert compression.decompress(layout.COMPRESSION_GZIP, section, 10_000) == (
        status.DECOMPRESS_FAILED
    )


def test_snappy_is_written_in_the_xerial_stream_format_kafka_writes() -> None:
    data = records_section(100_000)
    ours = compression.compress(layout.COMPRESSION_SNAPPY, data)
    assert ours[:16] == b"\x82SNAPPY\x00" + bytes([0, 0, 0, 1, 0, 0, 0, 1])
    # Chunks of 32 KiB of input, each [int32 BE length][raw snappy block].
    cursor, blocks = 16, []
    while cursor < len(ours):
        length = int.from_bytes(ours[cursor : cursor + 4], "big")
        blocks.append(bytes(cramjam.snappy.decompress_raw(ours[cursor + 4 : cursor + 4 + length])))
        cursor += 4 + length
    assert [len(block) for block in blocks] == [32768, 32768, 32768, 1696]
    assert b"".join(blocks) == data


def test_a_raw_snappy_block_is_read_as_snappy_javas_reader_falls_back_to() -> None:
    data = records_section(70_000)
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert compression.decompress(layout.COMPRESSION_SNAPPY, raw, len(data)) == data


def test_zstd_frames_may_follow_one_another() -> None:
    first, second = records_section(1000, 1), records_section(2000, 2)
    compressor = zstandard.ZstdCompressor()
    section = compressor.compress(first) + compressor.compress(second)
    assert compression.decompress(layout.COMPRESSION_ZSTD, section, 3000) == first + second


def _damaged(name: str, section: bytes) -> list[tuple[str, bytes]]:
    cases = [
        ("empty", b""),
        ("cut", section[: len(section) // 2]),
        ("last byte cut", section[:-1]),
        ("trailing byte", section + b"\x00"),
        ("garbage", bytes(random.Random(SEED).randrange(256) for _ in range(len(section)))),
    ]
    if name == "snappy":
        cases += [
            ("xerial header cut", section[:12]),
            ("xerial incompatible version", section[:12] + b"\x00\x00\x00\x02" + section[16:]),
            ("chunk length past the end", section[:16] + b"\x7f\xff\xff\xff" + section[20:]),
        ]
    return cases


@pytest.mark.parametrize("name", CODECS)
def test_a_damaged_section_is_a_status_never_an_exception(name: str) -> None:
    section = compression.compress(codec_id(name), records_section(40_000))
    for what, damaged in _damaged(name, section):
        result = compression.decompress(codec_id(name), damaged, 1 << 20)
        assert result == status.DECOMPRESS_FAILED, what


@pytest.mark.parametrize("name", CODECS)
def test_every_bit_flip_is_refused_or_decodes_to_the_same_length_at_most(name: str) -> None:
    # The batch CRC is what detects a flip (codec tests); a codec may decode a flipped
    # section to other bytes, but never raise, hang or exceed the limit.
    data = records_section(600)
    section = compression.compress(codec_id(name), data)
    rng = random.Random(SEED)
    for _ in range(300):
        flipped = bytearray(section)
        bit = rng.randrange(8 * len(section))
        flipped[bit // 8] ^= 1 << (bit % 8)
        result = compression.decompress(codec_id(name), bytes(flipped), len(data))
        assert isinstance(result, int) or len(result) <= len(data)


def test_an_unknown_codec_is_refused() -> None:
    assert compression.decompress(5, b"x", 100) == status.BAD_COMPRESSION
    with pytest.raises(ValueError, match="codec 5"):
        compression.compress(5, b"x")
    with pytest.raises(ValueError, match="level"):
        compression.compress(layout.COMPRESSION_ZSTD, b"x", level=-2)
    # A level past the codec's highest is lowered to it, as librdkafka does (not refused).
    assert compression.compress(layout.COMPRESSION_ZSTD, b"x", level=23) == (
        compression.compress(layout.COMPRESSION_ZSTD, b"x", level=22)
    )


@pytest.mark.parametrize(
    ("name", "asked", "used"),
    [
        ("gzip", -1, 6),  # Kafka's default: the JDK's
        ("gzip", 0, 0),  # stored, still a gzip stream
        ("gzip", 12, 9),  # past gzip's highest: its highest, as librdkafka lowers it
        ("lz4", -1, 0),  # lz4's fast mode, as Kafka and librdkafka write by default
        ("lz4", 12, 12),
        ("zstd", -1, 3),
        ("zstd", 12, 12),
        ("snappy", 5, 0),  # snappy has no levels
    ],
)
def test_a_compression_level_is_the_codecs_own_or_its_default(
    name: str, asked: int, used: int
) -> None:
    assert compression.codec_level(codec_id(name), asked) == used


@pytest.mark.parametrize("name", CODECS)
def test_a_level_below_minus_one_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="-1"):
        compression.compress(codec_id(name), b"x", -2)


@pytest.mark.parametrize("name", CODECS)
@pytest.mark.parametrize("level", [-1, 0, 1, 5, 12])
def test_every_level_round_trips(name: str, level: int) -> None:
    data = records_section(100_000)
    packed = compression.compress(codec_id(name), data, level)
    assert compression.decompress(codec_id(name), packed, len(data)) == data


def test_gzip_writes_the_level_it_was_given() -> None:
    """RFC 1952's XFL byte says which deflate level wrote the stream (4: fastest, 2: best), and
    level 9 deflates exactly as zlib's level 9."""
    data = records_section(50_000)
    fastest = compression.compress(layout.COMPRESSION_GZIP, data, 1)
    best = compression.compress(layout.COMPRESSION_GZIP, data, 9)
    assert (fastest[8], best[8]) == (4, 2)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    assert best[10:-8] == deflate.compress(data) + deflate.flush()


@pytest.mark.parametrize("name", ["lz4", "zstd"])
def test_a_higher_level_compresses_smaller(name: str) -> None:
    data = records_section(200_000)
    assert len(compression.compress(codec_id(name), data, 12)) < len(
        compression.compress(codec_id(name), data, 1)
    )
