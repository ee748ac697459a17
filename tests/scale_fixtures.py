"""Fixtures for the scale-out stores: a real PostgreSQL cluster and a moto S3 server, both on loopback."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator

import pytest
from pg_fixture import find_pg_bin, postgres_server

FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
}
BUCKET = "kt-test"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """DSN of a temporary PostgreSQL cluster (the tests need the server binaries, as CI has them)."""
    if find_pg_bin() is None:
        pytest.skip("PostgreSQL server binaries (initdb/pg_ctl) are not installed on this machine")
    with postgres_server() as dsn:
        yield dsn


@pytest.fixture
def pg_dsn(pg_server: str) -> str:
    """A fresh, empty database on the session's cluster."""
    import psycopg

    name = f"kt_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # name is generated above, never user input
    return pg_server.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 with a bucket, and fake credentials in the environment."""
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in [*FAKE_AWS, "AWS_ENDPOINT"]}
    os.environ.update(FAKE_AWS, AWS_ENDPOINT=endpoint)
    try:
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()


@pytest.fixture
def s3_uri(s3_endpoint: str) -> str:
    """A fresh ``s3://`` prefix for a vector store."""
    return f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}/lance"
