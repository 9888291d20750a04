//! Following the ensemble's membership, as Curator's `EnsembleTracker`
//! does: the configuration the servers publish (`get_config`) is read and
//! watched, and each time it changes the client's server list becomes the
//! servers' client addresses ([`Client::update_server_list`]), so that
//! sessions spread over servers that joined and leave servers that went,
//! with the probability that evens out the load.

use tokio::task::JoinHandle;

use super::retry;
use crate::{Client, Error};

/// Follows the ensemble's configuration until the session ends; the
/// returned task ends with it.
pub fn follow_ensemble(client: &Client) -> JoinHandle<Error> {
    let client = client.clone();
    tokio::spawn(async move {
        let mut servers = String::new();
        loop {
            let read = retry(&client, || client.get_config_watched()).await;
            let (data, _, watch) = match read {
                Ok(read) => read,
                Err(error) => return error,
            };
            let text = String::from_utf8_lossy(data.as_deref().unwrap_or_default()).into_owned();
            let listed = client_addresses(&text);
            // A standalone server publishes none: the list stays as given.
            if !listed.is_empty() && listed != servers {
                if let Err(error) = client.update_server_list(&listed).await {
                    return error;
                }
                servers = listed;
            }
            if let Err(error) = watch.await {
                return error;
            }
        }
    })
}

/// The client addresses of a configuration's servers, as a connect
/// string; a wildcard client address stands for the server's own host,
/// as in Curator.
fn client_addresses(config: &str) -> String {
    let addresses: Vec<String> = config
        .lines()
        .filter(|line| line.starts_with("server."))
        .filter_map(|line| {
            let (_, value) = line.split_once('=')?;
            let (quorum, client) = value.split_once(';')?;
            let host = quorum.split(':').next()?;
            let (client_host, port) = client.trim().rsplit_once(':').unwrap_or(("", client));
            let client_host = match client_host {
                "" | "0.0.0.0" | "[0:0:0:0:0:0:0:0]" => host,
                given => given,
            };
            Some(format!("{client_host}:{port}"))
        })
        .collect();
    addresses.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_addresses_come_from_the_server_lines() {
        let config = "server.1=10.0.0.1:2888:3888:participant;0.0.0.0:2181\n\
                      server.2=10.0.0.2:2888:3888:participant;10.0.1.2:2182\n\
                      server.3=10.0.0.3:2888:3888:observer;2183\n\
                      server.4=10.0.0.4:2888:3888:participant\n\
                      version=10000000c";
        assert_eq!(
            client_addresses(config),
            "10.0.0.1:2181,10.0.1.2:2182,10.0.0.3:2183"
        );
        assert_eq!(client_addresses(""), "");
    }
}
