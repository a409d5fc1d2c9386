"""ECIES (geth crypto/ecies, ECIES_AES128_SHA256) against the EIP-8 RLPx handshake vectors
(protocol-notes §7.4)."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from coincurve import PublicKey as CCPublicKey
from Crypto.Cipher import AES
from hypothesis import given, settings
from hypothesis import strategies as st

from wakucodec import ecies, rlp, secp
from wakucodec.ecies import _concat_kdf, _encrypt_with
from wakucodec.errors import DecryptionFailed, InvalidKey
from wakucodec.keccak import keccak256

H = bytes.fromhex

# EIP-8 "RLPx Handshake" test vectors (ethereum/EIPs EIPS/eip-8.md; geth p2p/rlpx_test.go), A initiates to B.
STATIC_A = H("49a7b37aa6f6645917e7b807e9d1c00d4fa71f18343b0d4122a4d2df64dd6fee")
STATIC_B = H("b71c71a67e1177ad4e901695e1b4b9ee17ae16c6668d313eac2f96dbcda3f291")
EPHEMERAL_A = H("869d6ecf5211f1cc60418a13b9d870b22959d0c16f02bec714c960dd2298a32d")
EPHEMERAL_B = H("e238eb8e04fee6511ab04c6dd3c89ce097b11f25d584863ac2b6d5b35b1847e4")
NONCE_A = H("7e968bba13b6c50e2c4cd7f241cc0d64d1ac25c7f5952df231ac6a2bda8ee5d6")
NONCE_B = H("559aead08264d5795d3909718cdd05abd49572e84fe55590eef31a88a08fdffd")

AUTH_1 = H(  # RLPx v4 ("plain") format: no size prefix, no MAC shared data
    "048ca79ad18e4b0659fab4853fe5bc58eb83992980f4c9cc147d2aa31532efd29a3d3dc6a3d89eaf913150cfc777ce0ce4af2758"
    "bf4810235f6e6ceccfee1acc6b22c005e9e3a49d6448610a58e98744ba3ac0399e82692d67c1f58849050b3024e21a52c9d3b01d"
    "871ff5f210817912773e610443a9ef142e91cdba0bd77b5fdf0769b05671fc35f83d83e4d3b0b000c6b2a1b1bba89e0fc51bf4e4"
    "60df3105c444f14be226458940d6061c296350937ffd5e3acaceeaaefd3c6f74be8e23e0f45163cc7ebd76220f0128410fd05250"
    "273156d548a414444ae2f7dea4dfca2d43c057adb701a715bf59f6fb66b2d1d20f2c703f851cbf5ac47396d9ca65b6260bd141ac"
    "4d53e2de585a73d1750780db4c9ee4cd4d225173a4592ee77e2bd94d0be3691f3b406f9bba9b591fc63facc016bfa8"
)
AUTH_2 = H(  # EIP-8, version 4, no extra list elements
    "01b304ab7578555167be8154d5cc456f567d5ba302662433674222360f08d5f1534499d3678b513b0fca474f3a514b18e7568303"
    "2eb63fccb16c156dc6eb2c0b1593f0d84ac74f6e475f1b8d56116b849634a8c458705bf83a626ea0384d4d7341aae591fae42ce6"
    "bd5c850bfe0b999a694a49bbbaf3ef6cda61110601d3b4c02ab6c30437257a6e0117792631a4b47c1d52fc0f8f89caadeb7d0277"
    "0bf999cc147d2df3b62e1ffb2c9d8c125a3984865356266bca11ce7d3a688663a51d82defaa8aad69da39ab6d5470e81ec5f2a7a"
    "47fb865ff7cca21516f9299a07b1bc63ba56c7a1a892112841ca44b6e0034dee70c9adabc15d76a54f443593fafdc3b27af80597"
    "03f88928e199cb122362a4b35f62386da7caad09c001edaeb5f8a06d2b26fb6cb93c52a9fca51853b68193916982358fe1e5369e"
    "249875bb8d0d0ec36f917bc5e1eafd5896d46bd61ff23f1a863a8a8dcd54c7b109b771c8e61ec9c8908c733c0263440e2aa06724"
    "1aaa433f0bb053c7b31a838504b148f570c0ad62837129e547678c5190341e4f1693956c3bf7678318e2d5b5340c9e488eefea19"
    "8576344afbdf66db5f51204a6961a63ce072c8926c"
)
AUTH_3 = H(  # EIP-8, version 56, extra list elements
    "01b8044c6c312173685d1edd268aa95e1d495474c6959bcdd10067ba4c9013df9e40ff45f5bfd6f72471f93a91b493f8e00abc4b"
    "80f682973de715d77ba3a005a242eb859f9a211d93a347fa64b597bf280a6b88e26299cf263b01b8dfdb712278464fd1c25840b9"
    "95e84d367d743f66c0e54a586725b7bbf12acca27170ae3283c1073adda4b6d79f27656993aefccf16e0d0409fe07db2dc398a1b"
    "7e8ee93bcd181485fd332f381d6a050fba4c7641a5112ac1b0b61168d20f01b479e19adf7fdbfa0905f63352bfc7e23cf3357657"
    "455119d879c78d3cf8c8c06375f3f7d4861aa02a122467e069acaf513025ff196641f6d2810ce493f51bee9c966b15c504350535"
    "0392b57645385a18c78f14669cc4d960446c17571b7c5d725021babbcd786957f3d17089c084907bda22c2b2675b4378b114c601"
    "d858802a55345a15116bc61da4193996187ed70d16730e9ae6b3bb8787ebcaea1871d850997ddc08b4f4ea668fbf37407ac044b5"
    "5be0908ecb94d4ed172ece66fd31bfdadf2b97a8bc690163ee11f5b575a4b44e36e2bfb2f0fce91676fd64c7773bac6a003f481f"
    "ddd0bae0a1f31aa27504e2a533af4cef3b623f4791b2cca6d490"
)
ACK_1 = H(
    "049f8abcfa9c0dc65b982e98af921bc0ba6e4243169348a236abe9df5f93aa69d99cadddaa387662b0ff2c08e9006d5a11a278b1"
    "b3331e5aaabf0a32f01281b6f4ede0e09a2d5f585b26513cb794d9635a57563921c04a9090b4f14ee42be1a5461049af4ea7a7f4"
    "9bf4c97a352d39c8d02ee4acc416388c1c66cec761d2bc1c72da6ba143477f049c9d2dde846c252c111b904f630ac98e51609b3b"
    "1f58168ddca6505b7196532e5f85b259a20c45e1979491683fee108e9660edbf38f3add489ae73e3dda2c71bd1497113d5c755e9"
    "42d1"
)
ACK_2 = H(
    "01ea0451958701280a56482929d3b0757da8f7fbe5286784beead59d95089c217c9b917788989470b0e330cc6e4fb383c0340ed8"
    "5fab836ec9fb8a49672712aeabbdfd1e837c1ff4cace34311cd7f4de05d59279e3524ab26ef753a0095637ac88f2b499b9914b5f"
    "64e143eae548a1066e14cd2f4bd7f814c4652f11b254f8a2d0191e2f5546fae6055694aed14d906df79ad3b407d94692694e2591"
    "91cde171ad542fc588fa2b7333313d82a9f887332f1dfc36cea03f831cb9a23fea05b33deb999e85489e645f6aab1872475d488d"
    "7bd6c7c120caf28dbfc5d6833888155ed69d34dbdc39c1f299be1057810f34fbe754d021bfca14dc989753d61c413d261934e1a9"
    "c67ee060a25eefb54e81a4d14baff922180c395d3f998d70f46f6b58306f969627ae364497e73fc27f6d17ae45a413d322cb8814"
    "276be6ddd13b885b201b943213656cde498fa0e9ddc8e0b8f8a53824fbd82254f3e2c17e8eaea009c38b4aa0a3f306e8797db43c"
    "25d68e86f262e564086f59a2fc60511c42abfb3057c247a8a8fe4fb3ccbadde17514b7ac8000cdb6a912778426260c47f38919a9"
    "1f25f4b5ffb455d6aaaf150f7e5529c100ce62d6d92826a71778d809bdf60232ae21ce8a437eca8223f45ac37f6487452ce626f5"
    "49b3b5fdee26afd2072e4bc75833c2464c805246155289f4"
)
ACK_3 = H(
    "01f004076e58aae772bb101ab1a8e64e01ee96e64857ce82b1113817c6cdd52c09d26f7b90981cd7ae835aeac72e1573b8a0225d"
    "d56d157a010846d888dac7464baf53f2ad4e3d584531fa203658fab03a06c9fd5e35737e417bc28c1cbf5e5dfc666de7090f69c3"
    "b29754725f84f75382891c561040ea1ddc0d8f381ed1b9d0d4ad2a0ec021421d847820d6fa0ba66eaf58175f1b235e851c7e2124"
    "069fbc202888ddb3ac4d56bcbd1b9b7eab59e78f2e2d400905050f4a92dec1c4bdf797b3fc9b2f8e84a482f3d800386186712dae"
    "00d5c386ec9387a5e9c9a1aca5a573ca91082c7d68421f388e79127a5177d4f8590237364fd348c9611fa39f78dcdceee3f390f0"
    "7991b7b47e1daa3ebcb6ccc9607811cb17ce51f1c8c2c5098dbdd28fca547b3f58c01a424ac05f869f49c6a34672ea2cbbc55842"
    "8aa1fe48bbfd61158b1b735a65d99f21e70dbc020bfdface9f724a0d1fb5895db971cc81aa7608baa0920abb0a565c9c436e2fd1"
    "3323428296c86385f2384e408a31e104670df0791d93e743a3a5194ee6b076fb6323ca593011b7348c16cf58f66b9633906ba54a"
    "2ee803187344b394f75dd2e663a57b956cb830dd7a908d4f39a2336a61ef9fda549180d4ccde21514d117b6c6fd07a9102b5efe7"
    "10a32af4eeacae2cb3b1dec035b9593b48b9d3ca4c13d245d5f04169b0b1"
)


def _open_eip8(packet: bytes, priv: bytes) -> list[rlp.Item]:
    """Open an EIP-8 packet (size prefix = MAC shared data); RLP-decode its first item, ignoring padding."""
    prefix, ciphertext = packet[:2], packet[2:]
    assert int.from_bytes(prefix, "big") == len(ciphertext)
    plain = ecies.decrypt(priv, ciphertext, shared_mac_data=prefix)
    assert plain[0] == 0xF8  # a list whose payload length takes one byte
    item = rlp.decode(plain[: 2 + plain[1]])
    assert isinstance(item, list)
    return item


def _auth_signed_message() -> bytes:
    # RLPx: sig = Sign(static-shared-secret XOR initiator-nonce, ephemeral key) — 32 bytes, not hashed (§5.2).
    static_shared = secp.ecdh_x(STATIC_A, secp.public_key(STATIC_B))
    return bytes(x ^ y for x, y in zip(static_shared, NONCE_A, strict=True))


@pytest.mark.parametrize(("packet", "version", "extra"), [(AUTH_2, 4, 0), (AUTH_3, 56, 3)])
def test_eip8_auth_decrypts_with_static_key_b(packet: bytes, version: int, extra: int) -> None:
    item = _open_eip8(packet, STATIC_B)
    sig, initiator_pub, nonce, ver = item[:4]
    assert initiator_pub == secp.public_key(STATIC_A)
    assert nonce == NONCE_A
    assert rlp.to_uint(ver, 64) == version
    assert len(item) == 4 + extra
    assert isinstance(sig, bytes)
    # The recipient recovers the initiator's ephemeral key from the signature.
    assert secp.recover_public_key(_auth_signed_message(), sig) == secp.public_key(EPHEMERAL_A)


@pytest.mark.parametrize(("packet", "version", "extra"), [(ACK_2, 4, 0), (ACK_3, 57, 3)])
def test_eip8_ack_decrypts_with_static_key_a(packet: bytes, version: int, extra: int) -> None:
    item = _open_eip8(packet, STATIC_A)
    assert item[0] == secp.public_key(EPHEMERAL_B)
    assert item[1] == NONCE_B
    assert rlp.to_uint(item[2], 64) == version
    assert len(item) == 3 + extra


def test_plain_auth_and_ack_decrypt_without_shared_data() -> None:
    # Pre-EIP-8 packets: sig(65) ‖ keccak256(ephemeral pub)(32) ‖ pub(64) ‖ nonce(32) ‖ 0x00 = 194 bytes.
    auth = ecies.decrypt(STATIC_B, AUTH_1)
    assert len(auth) == 194 == len(AUTH_1) - ecies.OVERHEAD
    sig, eph_hash, pub, nonce, flag = auth[:65], auth[65:97], auth[97:161], auth[161:193], auth[193]
    assert secp.recover_public_key(_auth_signed_message(), sig) == secp.public_key(EPHEMERAL_A)
    assert eph_hash == keccak256(secp.public_key(EPHEMERAL_A))
    assert (pub, nonce, flag) == (secp.public_key(STATIC_A), NONCE_A, 0)
    # ack = ephemeral pub(64) ‖ nonce(32) ‖ 0x00 = 97 bytes.
    ack = ecies.decrypt(STATIC_A, ACK_1)
    assert ack == secp.public_key(EPHEMERAL_B) + NONCE_B + b"\x00"


def test_eip8_packets_need_their_size_prefix_as_mac_data() -> None:
    with pytest.raises(DecryptionFailed):
        ecies.decrypt(STATIC_B, AUTH_2[2:])
    with pytest.raises(DecryptionFailed):
        ecies.decrypt(STATIC_B, AUTH_2[2:], shared_mac_data=b"\x01\xb4")
    with pytest.raises(DecryptionFailed):  # wrong recipient
        ecies.decrypt(STATIC_A, AUTH_2[2:], shared_mac_data=AUTH_2[:2])


def test_rlpx_secrets_from_raw_x_ecdh() -> None:
    # EIP-8: secrets B derives for (Auth₂, Ack₂) — proves ecdh_x is geth's raw X, not a hashed secret.
    ephemeral = secp.ecdh_x(EPHEMERAL_B, secp.public_key(EPHEMERAL_A))
    shared = keccak256(ephemeral + keccak256(NONCE_B + NONCE_A))
    aes_secret = keccak256(ephemeral + shared)
    assert aes_secret == H("80e8632c05fed6fc2a13b0f8d31a3cf645366239170ea067065aba8e28bac487")
    assert keccak256(ephemeral + aes_secret) == H(
        "2ea74ec5dae199227dff1af715362700e989d889d7a493cb0639691efb8e5f98"
    )


def test_concat_kdf_vectors() -> None:
    # go-ethereum crypto/ecies/ecies_test.go TestKDF (SHA-256, z = "input", s1 = nil).
    full = H(
        "858b192fa2ed4395e2bf88dd8d5770d67dc284ee539f12da8bceaa45d06ebae0"
        "700f1ab918a5f0413b8140f9940d6955f3467fd6672cce1024c5b1effccc0f61"
    )
    for length in (6, 32, 48, 64):
        assert _concat_kdf(b"input", b"", length) == full[:length]


# --- independent oracle: pycryptodome AES-CTR + hashlib + coincurve point multiplication -----------------


def _oracle_decrypt(priv: bytes, data: bytes, shared: bytes) -> bytes:
    z = CCPublicKey(data[:65]).multiply(priv).format()[1:]
    k = hashlib.sha256(b"\x00\x00\x00\x01" + z).digest()
    km = hashlib.sha256(k[16:]).digest()
    assert hmac.digest(km, data[65:-32] + shared, "sha256") == data[-32:]
    iv = data[65:81]
    return bytes(AES.new(k[:16], AES.MODE_CTR, nonce=b"", initial_value=iv).decrypt(data[81:-32]))


@settings(max_examples=50)
@given(plaintext=st.binary(max_size=600), shared=st.binary(max_size=8))
def test_round_trip_and_oracle(plaintext: bytes, shared: bytes) -> None:
    data = ecies.encrypt(secp.public_key(STATIC_B), plaintext, shared_mac_data=shared)
    assert len(data) == len(plaintext) + ecies.OVERHEAD
    assert data[0] == 0x04
    assert ecies.decrypt(STATIC_B, data, shared_mac_data=shared) == plaintext
    assert _oracle_decrypt(STATIC_B, data, shared) == plaintext


def test_deterministic_core_and_counter_overflow() -> None:
    # IV ff…ff: the CTR counter must wrap across all 16 bytes (Go cipher.NewCTR), which the oracle also does.
    iv = b"\xff" * 16
    plaintext = bytes(range(256)) * 3
    data = _encrypt_with(secp.public_key(STATIC_B), plaintext, b"x", EPHEMERAL_A, iv)
    assert data[:65] == b"\x04" + secp.public_key(EPHEMERAL_A)
    assert data[65:81] == iv
    assert data == _encrypt_with(secp.public_key(STATIC_B), plaintext, b"x", EPHEMERAL_A, iv)
    assert _oracle_decrypt(STATIC_B, data, b"x") == plaintext
    assert ecies.decrypt(STATIC_B, data, shared_mac_data=b"x") == plaintext


def test_empty_plaintext_is_113_bytes() -> None:
    data = ecies.encrypt(secp.public_key(STATIC_A), b"")
    assert len(data) == ecies.OVERHEAD == 113
    assert ecies.decrypt(STATIC_A, data) == b""


# --- tampering and malformed input ---------------------------------------------------------------------

_SAMPLE = _encrypt_with(secp.public_key(STATIC_B), b"tamper with me", b"", EPHEMERAL_A, bytes(range(16)))


@settings(max_examples=100)
@given(
    index=st.integers(min_value=0, max_value=len(_SAMPLE) - 1), mask=st.integers(min_value=1, max_value=255)
)
def test_any_flipped_bit_fails(index: int, mask: int) -> None:
    tampered = bytearray(_SAMPLE)
    tampered[index] ^= mask
    with pytest.raises(DecryptionFailed):
        ecies.decrypt(STATIC_B, bytes(tampered))


def test_every_byte_position_is_authenticated() -> None:
    for index in range(len(_SAMPLE)):
        tampered = bytearray(_SAMPLE)
        tampered[index] ^= 0x01
        with pytest.raises(DecryptionFailed):
            ecies.decrypt(STATIC_B, bytes(tampered))


@pytest.mark.parametrize("length", [0, 1, 65, 97, 98, 112])
def test_short_input(length: int) -> None:
    # geth accepts 98..112 bytes up to the MAC check and would then panic in symDecrypt.
    with pytest.raises(DecryptionFailed):
        ecies.decrypt(STATIC_B, _SAMPLE[:length])


@pytest.mark.parametrize("prefix", [0x00, 0x02, 0x03, 0x05, 0x06, 0x07, 0xFF])
def test_ephemeral_key_must_be_uncompressed(prefix: int) -> None:
    with pytest.raises(DecryptionFailed):
        ecies.decrypt(STATIC_B, bytes((prefix,)) + _SAMPLE[1:])


def test_off_curve_ephemeral_key() -> None:
    with pytest.raises(DecryptionFailed):
        ecies.decrypt(STATIC_B, b"\x04" + bytes(64) + _SAMPLE[65:])


def test_wrong_shared_data_and_wrong_key() -> None:
    with pytest.raises(DecryptionFailed):
        ecies.decrypt(STATIC_B, _SAMPLE, shared_mac_data=b"\x00")
    with pytest.raises(DecryptionFailed):
        ecies.decrypt(STATIC_A, _SAMPLE)


def test_bad_keys_raise_invalid_key() -> None:
    with pytest.raises(InvalidKey):
        ecies.decrypt(bytes(32), _SAMPLE)
    with pytest.raises(InvalidKey):
        ecies.encrypt(bytes(64), b"x")
    with pytest.raises(InvalidKey):
        ecies.encrypt(secp.public_key(STATIC_A)[:63], b"x")
    assert ecies.decrypt(STATIC_B, ecies.encrypt(b"\x04" + secp.public_key(STATIC_B), b"x")) == b"x"
