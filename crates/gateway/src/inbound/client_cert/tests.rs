use super::*;
use proxypool_testkit::tls::TestCa;

fn der_of(path: &std::path::Path) -> CertificateDer<'static> {
    proxypool_edge::tls::load_certs(path).unwrap().remove(0)
}

#[test]
fn dns_names_are_the_identity_in_lower_case_and_the_common_name_is_then_ignored() {
    let ca = TestCa::new("clients").unwrap();
    let files = ca
        .server_for(
            "two",
            &["Scraper-1.Clients.Example.", "b.example", "127.0.0.1"],
        )
        .unwrap();
    // The subject CN is "two": with DNS names present it is not a name.
    assert_eq!(
        names_of(&der_of(&files.cert)),
        vec![
            "b.example".to_owned(),
            "scraper-1.clients.example".to_owned()
        ]
    );
}

#[test]
fn without_dns_names_the_subject_common_name_is_the_identity() {
    let ca = TestCa::new("clients").unwrap();
    let files = ca.client("cn", "Worker-7.Example").unwrap();
    assert_eq!(
        names_of(&der_of(&files.cert)),
        vec!["worker-7.example".to_owned()]
    );
}

#[test]
fn garbage_or_truncated_der_names_nothing() {
    let ca = TestCa::new("clients").unwrap();
    let der = der_of(&ca.client("cn", "worker").unwrap().cert);
    for cut in [0, 1, 10, der.len() / 2, der.len() - 1] {
        let truncated = CertificateDer::from(der.as_ref()[..cut].to_vec());
        assert!(names_of(&truncated).is_empty(), "cut at {cut}");
    }
    assert!(names_of(&CertificateDer::from(vec![0x30, 0x84, 0xff, 0xff])).is_empty());
    assert!(ClientCertificate::of(&CertificateDer::from(vec![1, 2, 3])).is_none());
}
