//! The UnsortedStore's in-memory hash index (UniKV §III-B). To be built.
