//! Splitting requests per broker and merging their responses.
