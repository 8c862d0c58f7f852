//! The driver running in-process on the test channel, for the tests that talk to it.
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::channel::Channel;
use dionysus_driver::config::Config;
use dionysus_driver::conversation::Handled;
use dionysus_driver::{runtime, Mind};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

pub struct Running {
    pub mind: Arc<Mind>,
    pub channel: Arc<TestChannel>,
    pub handled: mpsc::UnboundedReceiver<Handled>,
    pub task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// The driver on a test channel where `allowed` may talk.
    pub async fn start(config: Config, allowed: &[&str]) -> Running {
        Running::on(config, Arc::new(TestChannel::new(allowed))).await
    }

    /// The driver on a test channel of the caller's making.
    pub async fn on(config: Config, channel: Arc<TestChannel>) -> Running {
        let dyn_channel: Arc<dyn Channel> = channel.clone();
        let mind = Arc::new(Mind::new(config, dyn_channel));
        let (tx, handled) = mpsc::unbounded_channel();
        let task = tokio::spawn(runtime::run(mind.clone(), Some(tx)));
        Running { mind, channel, handled, task }
    }

    /// Delivers a message and waits until the conversation has handled it.
    pub async fn say(&mut self, id: &str, author: &str, text: &str) -> Handled {
        self.channel.deliver(id, author, text).await;
        tokio::time::timeout(Duration::from_secs(60), self.handled.recv()).await.expect("message not handled within 60 s").expect("driver stopped")
    }

    pub async fn stop(self) {
        self.mind.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task).await.expect("driver did not stop").unwrap();
    }
}
