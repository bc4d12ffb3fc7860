//! The sandbox's `wasi:io/streams` and `wasi:io/poll`: never block, never enter a Tokio
//! runtime.
//!
//! wasmtime-wasi's synchronous bindings run blocking stream operations (`blocking-flush`,
//! `blocking-write-and-flush`, dropping a stream, `poll`) through `Handle::block_on`, which
//! panics on a Tokio worker thread — where the gateway calls its plugins. A guest that panics
//! (Rust's panic handler writes to stderr) or simply prints would take the host thread down.
//! Here every operation completes at once or traps: the only streams a plugin can reach are
//! its stdio (stdout and stderr discard, stdin is closed), which are always ready, so a
//! blocking call that cannot finish immediately is a plugin waiting for something that will
//! never come — a trap, not a hang.

use futures_util::FutureExt;
use wasmtime::component::{HasData, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::sync::io::{poll as sync_poll, streams as sync_streams};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, DynPollable, StreamError, StreamResult};
use wasmtime_wasi_io::bindings::wasi::io::{poll as async_poll, streams as async_streams};

/// The `HasData` projection for [`SandboxIo`].
pub(crate) struct SandboxIoData;

impl HasData for SandboxIoData {
    type Data<'a> = SandboxIo<'a>;
}

/// The store's resource table, seen through the sandbox's non-blocking stream and poll
/// implementations.
pub(crate) struct SandboxIo<'a>(pub(crate) &'a mut ResourceTable);

fn would_block() -> wasmtime::Error {
    wasmtime::format_err!(
        "blocking I/O that is not ready at once: the plugin sandbox has nothing to wait for"
    )
}

/// Drive a stream future that is ready at once, or trap.
fn now_stream<T>(f: impl std::future::Future<Output = StreamResult<T>>) -> StreamResult<T> {
    f.now_or_never()
        .unwrap_or_else(|| Err(StreamError::Trap(would_block())))
}

/// Drive a future that is ready at once, or trap.
fn now<T>(f: impl std::future::Future<Output = wasmtime::Result<T>>) -> wasmtime::Result<T> {
    f.now_or_never().unwrap_or_else(|| Err(would_block()))
}

impl sync_streams::Host for SandboxIo<'_> {
    fn convert_stream_error(
        &mut self,
        err: StreamError,
    ) -> wasmtime::Result<sync_streams::StreamError> {
        sync_streams::Host::convert_stream_error(self.0, err)
    }
}

impl sync_streams::HostOutputStream for SandboxIo<'_> {
    fn drop(&mut self, stream: Resource<DynOutputStream>) -> wasmtime::Result<()> {
        now(async_streams::HostOutputStream::drop(self.0, stream))
    }

    fn check_write(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<u64> {
        sync_streams::HostOutputStream::check_write(self.0, stream)
    }

    fn write(&mut self, stream: Resource<DynOutputStream>, bytes: Vec<u8>) -> StreamResult<()> {
        sync_streams::HostOutputStream::write(self.0, stream, bytes)
    }

    fn blocking_write_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        bytes: Vec<u8>,
    ) -> StreamResult<()> {
        now_stream(async_streams::HostOutputStream::blocking_write_and_flush(
            self.0, stream, bytes,
        ))
    }

    fn blocking_write_zeroes_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        len: u64,
    ) -> StreamResult<()> {
        now_stream(
            async_streams::HostOutputStream::blocking_write_zeroes_and_flush(self.0, stream, len),
        )
    }

    fn subscribe(
        &mut self,
        stream: Resource<DynOutputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        sync_streams::HostOutputStream::subscribe(self.0, stream)
    }

    fn write_zeroes(&mut self, stream: Resource<DynOutputStream>, len: u64) -> StreamResult<()> {
        sync_streams::HostOutputStream::write_zeroes(self.0, stream, len)
    }

    fn flush(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<()> {
        sync_streams::HostOutputStream::flush(self.0, stream)
    }

    fn blocking_flush(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<()> {
        now_stream(async_streams::HostOutputStream::blocking_flush(
            self.0, stream,
        ))
    }

    fn splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        sync_streams::HostOutputStream::splice(self.0, dst, src, len)
    }

    fn blocking_splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        now_stream(async_streams::HostOutputStream::blocking_splice(
            self.0, dst, src, len,
        ))
    }
}

impl sync_streams::HostInputStream for SandboxIo<'_> {
    fn drop(&mut self, stream: Resource<DynInputStream>) -> wasmtime::Result<()> {
        now(async_streams::HostInputStream::drop(self.0, stream))
    }

    fn read(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<Vec<u8>> {
        sync_streams::HostInputStream::read(self.0, stream, len)
    }

    fn blocking_read(
        &mut self,
        stream: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<Vec<u8>> {
        now_stream(async_streams::HostInputStream::blocking_read(
            self.0, stream, len,
        ))
    }

    fn skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        sync_streams::HostInputStream::skip(self.0, stream, len)
    }

    fn blocking_skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        now_stream(async_streams::HostInputStream::blocking_skip(
            self.0, stream, len,
        ))
    }

    fn subscribe(
        &mut self,
        stream: Resource<DynInputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        sync_streams::HostInputStream::subscribe(self.0, stream)
    }
}

impl sync_poll::Host for SandboxIo<'_> {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        now(async_poll::Host::poll(self.0, pollables))
    }
}

impl sync_poll::HostPollable for SandboxIo<'_> {
    fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        now(async_poll::HostPollable::ready(self.0, pollable))
    }

    fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        now(async_poll::HostPollable::block(self.0, pollable))
    }

    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        async_poll::HostPollable::drop(self.0, pollable)
    }
}
