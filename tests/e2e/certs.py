"""Certificates for the TLS tests, made on the spot with `cryptography`: a
CA, a server certificate for 127.0.0.1 and localhost, client certificates
(one expired, one from a CA nobody trusts), each written as the PEM files
ZooKeeper and Paddock read: a key store holds the key and its chain, a
trust store the trusted certificates."""

import datetime
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

DAY = datetime.timedelta(days=1)


@dataclass
class Issued:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    keystore: Path   # key + certificate, PEM
    certfile: Path   # certificate alone, PEM
    keyfile: Path    # key alone, PEM


def name(cn: str, org: str = "Paddock") -> x509.Name:
    return x509.Name([
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
        x509.NameAttribute(NameOID.COMMON_NAME, cn),
    ])


def _pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class Authority:
    """A CA that issues certificates into `directory`."""

    def __init__(self, directory: Path, cn: str = "Paddock Test CA"):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (x509.CertificateBuilder()
                     .subject_name(name(cn)).issuer_name(name(cn))
                     .public_key(self.key.public_key())
                     .serial_number(x509.random_serial_number())
                     .not_valid_before(now - DAY).not_valid_after(now + 30 * DAY)
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                     .add_extension(x509.KeyUsage(
                         digital_signature=True, key_cert_sign=True, crl_sign=True,
                         content_commitment=False, key_encipherment=False,
                         data_encipherment=False, key_agreement=False,
                         encipher_only=False, decipher_only=False), True)
                     .sign(self.key, hashes.SHA256()))
        self.truststore = directory / f"{cn.replace(' ', '-').lower()}.pem"
        self.truststore.write_bytes(_pem(self.cert))

    def issue(self, file: str, cn: str, server: bool = False,
              expired: bool = False) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        start, end = (now - 10 * DAY, now - DAY) if expired else (now - DAY, now + 30 * DAY)
        builder = (x509.CertificateBuilder()
                   .subject_name(name(cn)).issuer_name(self.cert.subject)
                   .public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(end)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
                   .add_extension(x509.ExtendedKeyUsage(
                       [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
                        x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(IPv4Address("127.0.0.1"))]),
                False)
        cert = builder.sign(self.key, hashes.SHA256())
        keystore = self.directory / f"{file}.pem"
        keystore.write_bytes(_key_pem(key) + _pem(cert))
        certfile = self.directory / f"{file}.crt.pem"
        certfile.write_bytes(_pem(cert))
        keyfile = self.directory / f"{file}.key.pem"
        keyfile.write_bytes(_key_pem(key))
        return Issued(key, cert, keystore, certfile, keyfile)


def java_subject(cert: x509.Certificate) -> str:
    """The subject as Java's X500Principal.getName() prints these names."""
    return cert.subject.rfc4514_string()
