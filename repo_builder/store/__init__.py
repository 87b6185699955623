"""Where repositories live: every storage scheme in one place (issue 22). Nothing outside this package
knows a scheme (``tests/store/test_scheme_home.py``).

- ``urls``: the schemes (local folder vs URL, ``s3``, ``gs``, ``az``), URL parsing incl. Triton's forms.
- ``for_triton``: a URL and its credentials as tritonserver reads the store itself (``serve``, ``--live``).
- ``fsspec_store``: listing, reading, writing below a prefix; ``s3``: what S3 adds (options, checksums).
- ``deadline``, ``retries``: time limits and retries of every call, failures as the package's errors.
- ``local``: a listing laid out below a local folder, downloads into one (paths via ``safe_paths``).
- ``placeholders``: the object that keeps an empty version folder; ``publish_record``: publish's record.

Light on import: third-party store packages are imported when a store is opened.
"""
