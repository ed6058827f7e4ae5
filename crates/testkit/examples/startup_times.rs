//! Measures how long the guards take: `cargo run -p proxypool-testkit --example startup_times`.
//!
//! The first PostgreSQL start of a process includes initdb of the template; later starts
//! only copy it. Restart times are stop + start on the same port.

use std::time::{Duration, Instant};

use proxypool_testkit::{PostgresServer, RedisServer};

fn timed<T>(what: &str, action: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let value = action();
    println!("{what:<40} {:>8.1} ms", millis(started.elapsed()));
    value
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn main() -> Result<(), proxypool_testkit::TestkitError> {
    for round in 1..=3 {
        let mut redis = timed(&format!("redis start #{round}"), RedisServer::start_private)?;
        timed(&format!("redis restart #{round}"), || redis.restart())?;
        timed(&format!("redis drop #{round}"), || drop(redis));
    }
    for round in 1..=3 {
        let label = if round == 1 {
            "postgres start #1 (with initdb)".to_owned()
        } else {
            format!("postgres start #{round}")
        };
        let mut postgres = timed(&label, PostgresServer::start_private)?;
        timed(&format!("postgres create_database #{round}"), || {
            postgres.create_database("timing")
        })?;
        timed(&format!("postgres restart #{round}"), || postgres.restart())?;
        timed(&format!("postgres drop #{round}"), || drop(postgres));
    }
    Ok(())
}
