//! A local Discord-compatible server, at the wire: the REST API the serenity adapter calls
//! (`/gateway`, messages with `nonce` and `enforce_nonce`, DMs, typing, reactions, interaction
//! callbacks) and the gateway websocket (HELLO, IDENTIFY, READY, heartbeats, and whatever
//! dispatches the test sends: MESSAGE_CREATE, MESSAGE_REACTION_ADD, INTERACTION_CREATE).
//! Everything the adapter sends is recorded for the test to read.
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::Message as Ws;

/// The bot's own user id.
pub const BOT_ID: &str = "900000000000000001";

/// One REST call the adapter made.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub path: String,
    /// The JSON body (a multipart body's `payload_json` part), or Null.
    pub body: Value,
    /// The raw body (a multipart body carries the attached files).
    pub raw: Vec<u8>,
}

#[derive(Clone)]
pub struct FakeDiscord {
    pub api_base: String,
    gateway_url: String,
    calls: Arc<Mutex<Vec<Call>>>,
    /// Message ids by nonce, as Discord's enforce_nonce keeps them.
    nonces: Arc<Mutex<HashMap<String, String>>>,
    next_id: Arc<Mutex<u64>>,
    dispatch: broadcast::Sender<Value>,
    identified: Arc<Mutex<Vec<Value>>>,
    /// Messages created: (id, channel, the request's body), in order (a nonce replay adds none).
    posted: Arc<Mutex<Vec<(String, String, Value)>>>,
}

pub fn user(id: &str, name: &str, bot: bool) -> Value {
    json!({"id": id, "username": name, "discriminator": "0", "global_name": name, "avatar": null, "bot": bot})
}

/// A message object as the gateway and the REST API give it.
pub fn message(id: &str, channel_id: &str, author: Value, content: &str, guild_id: Option<&str>) -> Value {
    let mut m = json!({
        "id": id, "channel_id": channel_id, "author": author, "content": content,
        "timestamp": "2026-11-24T12:00:00.000000+00:00", "edited_timestamp": null, "tts": false,
        "mention_everyone": false, "mentions": [], "mention_roles": [], "attachments": [], "embeds": [],
        "pinned": false, "type": 0
    });
    if let Some(g) = guild_id {
        m["guild_id"] = json!(g);
    }
    m
}

impl FakeDiscord {
    pub async fn start() -> FakeDiscord {
        let api = TcpListener::bind("127.0.0.1:0").await.expect("bind fake Discord API");
        let gateway = TcpListener::bind("127.0.0.1:0").await.expect("bind fake Discord gateway");
        let (dispatch, _) = broadcast::channel(256);
        let me = FakeDiscord {
            api_base: format!("http://{}", api.local_addr().unwrap()),
            gateway_url: format!("ws://{}", gateway.local_addr().unwrap()),
            calls: Default::default(),
            nonces: Default::default(),
            next_id: Arc::new(Mutex::new(800_000_000_000_000_000)),
            dispatch,
            identified: Default::default(),
            posted: Default::default(),
        };
        let server = me.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = api.accept().await {
                let s = server.clone();
                tokio::spawn(async move {
                    let _ = s.serve_rest(sock).await;
                });
            }
        });
        let server = me.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = gateway.accept().await {
                let s = server.clone();
                tokio::spawn(async move {
                    let _ = s.serve_gateway(sock).await;
                });
            }
        });
        me
    }

    fn new_id(&self) -> String {
        let mut n = self.next_id.lock().unwrap();
        *n += 1;
        n.to_string()
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// Messages created (a replay under a nonce already seen creates none).
    pub fn posted(&self) -> Vec<(String, String, Value)> {
        self.posted.lock().unwrap().clone()
    }

    /// The IDENTIFY payloads the gateway received.
    pub fn identified(&self) -> Vec<Value> {
        self.identified.lock().unwrap().clone()
    }

    /// Sends a dispatch (`t`, `d`) to every connected gateway session.
    pub fn dispatch(&self, t: &str, d: Value) {
        let _ = self.dispatch.send(json!({"t": t, "d": d}));
    }

    /// Waits until some recorded call satisfies `pred` (30 s at most).
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&Call) -> bool) -> Call {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(c) = self.calls().into_iter().find(|c| pred(c)) {
                return c;
            }
            assert!(tokio::time::Instant::now() < deadline, "no {what}; calls: {:?}", self.calls().iter().map(|c| format!("{} {}", c.method, c.path)).collect::<Vec<_>>());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn serve_gateway(&self, sock: TcpStream) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let mut ws = tokio_tungstenite::accept_async(sock).await?;
        let mut events = self.dispatch.subscribe();
        ws.send(Ws::Text(json!({"op": 10, "d": {"heartbeat_interval": 41250}}).to_string())).await?;
        let mut seq = 0u64;
        loop {
            tokio::select! {
                frame = ws.next() => {
                    let Some(frame) = frame else { return Ok(()) };
                    let text = match frame? {
                        Ws::Text(t) => t,
                        Ws::Close(_) => return Ok(()),
                        _ => continue,
                    };
                    let v: Value = serde_json::from_str(&text)?;
                    match v["op"].as_u64() {
                        Some(1) => ws.send(Ws::Text(json!({"op": 11}).to_string())).await?,
                        Some(2) => {
                            self.identified.lock().unwrap().push(v["d"].clone());
                            seq += 1;
                            let ready = json!({
                                "v": 10, "user": user(BOT_ID, "dionysus", true), "guilds": [], "session_id": "fake-session",
                                "resume_gateway_url": self.gateway_url, "shard": [0, 1], "application": {"id": BOT_ID, "flags": 0}
                            });
                            ws.send(Ws::Text(json!({"op": 0, "s": seq, "t": "READY", "d": ready}).to_string())).await?;
                        }
                        _ => {}
                    }
                }
                e = events.recv() => {
                    let Ok(e) = e else { continue };
                    seq += 1;
                    ws.send(Ws::Text(json!({"op": 0, "s": seq, "t": e["t"], "d": e["d"]}).to_string())).await?;
                }
            }
        }
    }

    async fn serve_rest(&self, mut sock: TcpStream) -> std::io::Result<()> {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 16384];
        loop {
            // One request: its head, then Content-Length bytes of body.
            let head_end = loop {
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
                let n = sock.read(&mut chunk).await?;
                if n == 0 {
                    return Ok(());
                }
                buf.extend_from_slice(&chunk[..n]);
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
            let len = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
                .unwrap_or(0);
            while buf.len() < head_end + len {
                let n = sock.read(&mut chunk).await?;
                if n == 0 {
                    return Ok(());
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let raw = buf[head_end..head_end + len].to_vec();
            buf.drain(..head_end + len);
            let mut first = head.lines().next().unwrap_or("").split_whitespace();
            let (method, path) = (first.next().unwrap_or("").to_string(), first.next().unwrap_or("").to_string());
            let body = serde_json::from_slice(&raw).unwrap_or_else(|_| payload_json(&raw));
            let call = Call { method: method.clone(), path: path.clone(), body, raw };
            let (status, answer) = self.route(&call);
            self.calls.lock().unwrap().push(call);
            let text = answer.map(|a| a.to_string()).unwrap_or_default();
            let resp = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n{text}",
                text.len()
            );
            sock.write_all(resp.as_bytes()).await?;
        }
    }

    fn route(&self, c: &Call) -> (&'static str, Option<Value>) {
        let path = c.path.trim_start_matches("/api/v10");
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        match (c.method.as_str(), parts.as_slice()) {
            ("GET", ["gateway"]) | ("GET", ["gateway", "bot"]) => {
                ("200 OK", Some(json!({"url": self.gateway_url, "shards": 1,
                                       "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}})))
            }
            ("GET", ["users", "@me"]) => ("200 OK", Some(user(BOT_ID, "dionysus", true))),
            ("POST", ["users", "@me", "channels"]) => {
                let recipient = c.body["recipient_id"].as_str().map(str::to_string).unwrap_or_else(|| c.body["recipient_id"].to_string());
                ("200 OK", Some(json!({"id": format!("7{}", &recipient[1..]), "type": 1, "last_message_id": null,
                                       "recipients": [user(&recipient, "person", false)]})))
            }
            ("POST", ["channels", channel, "messages"]) => {
                let nonce = c.body["nonce"].as_str().map(str::to_string);
                if c.body["enforce_nonce"] == Value::Bool(true) {
                    if let Some(id) = nonce.as_ref().and_then(|n| self.nonces.lock().unwrap().get(n).cloned()) {
                        let mut m = message(&id, channel, user(BOT_ID, "dionysus", true), c.body["content"].as_str().unwrap_or(""), None);
                        m["nonce"] = json!(nonce);
                        return ("200 OK", Some(m));
                    }
                }
                let id = self.new_id();
                if let Some(n) = &nonce {
                    self.nonces.lock().unwrap().insert(n.clone(), id.clone());
                }
                self.posted.lock().unwrap().push((id.clone(), channel.to_string(), c.body.clone()));
                let mut m = message(&id, channel, user(BOT_ID, "dionysus", true), c.body["content"].as_str().unwrap_or(""), None);
                m["embeds"] = c.body["embeds"].clone().as_array().map(|_| c.body["embeds"].clone()).unwrap_or(json!([]));
                ("200 OK", Some(m))
            }
            ("POST", ["channels", _, "typing"]) => ("204 No Content", None),
            ("PUT", ["channels", _, "messages", _, "reactions", _, "@me"]) => ("204 No Content", None),
            ("DELETE", ["channels", _, "messages", _, "reactions", _, "@me"]) => ("204 No Content", None),
            ("POST", ["interactions", _, _, "callback"]) => ("204 No Content", None),
            _ => ("404 Not Found", Some(json!({"message": "404: Not Found", "code": 0}))),
        }
    }
}

/// A multipart body's `payload_json` part (interaction callbacks with files).
fn payload_json(raw: &[u8]) -> Value {
    let text = String::from_utf8_lossy(raw);
    let Some(at) = text.find("name=\"payload_json\"") else { return Value::Null };
    let rest = &text[at..];
    let Some(start) = rest.find("\r\n\r\n") else { return Value::Null };
    let body = &rest[start + 4..];
    let end = body.find("\r\n--").unwrap_or(body.len());
    serde_json::from_str(&body[..end]).unwrap_or(Value::Null)
}

/// An interaction as INTERACTION_CREATE carries it: a button press (type 3) or a modal
/// submitted (type 5, `fields` its inputs), by `author` on the card `card_id` in `channel_id`.
pub fn interaction(id: &str, author: &str, channel_id: &str, card_id: &str, custom_id: &str, fields: &[(&str, &str)]) -> Value {
    let mut i = json!({
        "id": id, "application_id": BOT_ID, "channel_id": channel_id, "user": user(author, "someone", false),
        "token": format!("token-{id}"), "version": 1, "locale": "en-US", "entitlements": [], "attachment_size_limit": 8388608,
        "message": message(card_id, channel_id, user(BOT_ID, "dionysus", true), "", None),
    });
    if fields.is_empty() {
        i["type"] = json!(3);
        i["data"] = json!({"custom_id": custom_id, "component_type": 2});
    } else {
        i["type"] = json!(5);
        let rows: Vec<Value> =
            fields.iter().map(|(k, v)| json!({"type": 1, "components": [{"type": 4, "custom_id": k, "value": v}]})).collect();
        i["data"] = json!({"custom_id": custom_id, "components": rows});
    }
    i
}
