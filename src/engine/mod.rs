//! The pure probe engine: no clock, no sockets, no processes.
