"""hopqa.config: credentials never leave a URL that is recorded or printed."""

import pytest

from hopqa.config import redact_credentials


@pytest.mark.parametrize("text,expected", [
    ("openai:m@http://user:secret@host:8000/v1", "openai:m@http://***@host:8000/v1"),
    ("openai:m@https://token@host/v1?timeout=3", "openai:m@https://***@host/v1?timeout=3"),
    ("openai:m@http://u:p@ss@host/v1", "openai:m@http://***@host/v1"),  # '@' inside the password
    ("a http://a:b@c/d and https://e:f@g/h", "a http://***@c/d and https://***@g/h"),
    ("openai:m@http://host/v1", "openai:m@http://host/v1"),  # the model's own '@' is not a credential
    ("http://host/v1?q=a@b", "http://host/v1?q=a@b"),  # '@' after the host is not a credential
    ("embedded:qwen2.5-1.5b", "embedded:qwen2.5-1.5b"),
])
def test_redact_credentials(text, expected):
    assert redact_credentials(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("openai:m@http://host/v1?api_key=sk-123", "openai:m@http://host/v1?api_key=***"),
    ("http://h/v1?timeout=3&API_KEY=sk-1&retries=2", "http://h/v1?timeout=3&API_KEY=***&retries=2"),
    ("'openai:m@http://h/v1?token=abc' is bad", "'openai:m@http://h/v1?token=***' is bad"),  # quotes end the value
    ("https://u:p@h/x?access_token=t#frag", "https://***@h/x?access_token=***#frag"),
    ("http://h/?apikey=1&api-key=2&key=3&secret=4&client_secret=5&password=6&passwd=7&auth=8&sig=9",
     "http://h/?apikey=***&api-key=***&key=***&secret=***&client_secret=***&password=***&passwd=***&auth=***&sig=***"),
    ("https://b.s3.amazonaws.com/o?X-Amz-Credential=AKIA/x&X-Amz-Signature=abc&X-Amz-Expires=60",
     "https://b.s3.amazonaws.com/o?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Expires=60"),
    ("http://h/cb#access_token=tok&state=1", "http://h/cb#access_token=***&state=1"),
    ("http://h/v1?Authorization=Bearer%20sk&session_id=9&x-auth-token=z",
     "http://h/v1?Authorization=***&session_id=***&x-auth-token=***"),
    ("http://h/v1?api%5Fkey=sk-9", "http://h/v1?api%5Fkey=***"),  # the name as the server reads it
    # options that only look alike stay, and so do empty values
    ("http://h/v1?max_tokens=5&keyword=x&n=2&timeout=3&key=", "http://h/v1?max_tokens=5&keyword=x&n=2&timeout=3&key="),
    ("openai:m@http://h/v1?concurrency=2&context=4096", "openai:m@http://h/v1?concurrency=2&context=4096"),
    ("a http://h/?token=1 and https://g/?q=2&token=3 ", "a http://h/?token=*** and https://g/?q=2&token=*** "),
])
def test_redact_credential_query_parameters(text, expected):
    assert redact_credentials(text) == expected
