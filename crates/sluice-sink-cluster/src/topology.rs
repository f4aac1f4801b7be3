//! The cluster as Sluice sees it.
